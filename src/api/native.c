/*
 * native.c -- the engine: verified models, one resident at a time, one slot
 * reproducing llama-server b11669's generation rules, and the llama-server
 * routes on top of serve.c's transport. See native.h and
 * docs/modules/native.md.
 *
 * Locking: one mutex (eng.run) is held for a whole request that touches the
 * model (load, prompt, generation, tokenizer), so requests are served one at
 * a time as llama-server's single slot serves them, and a model switch never
 * has two models in memory. The reaper takes the same mutex.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bankml.h"
#include "base/base.h"
#include "graph/forward.h"
#include "file/gguf.h"
#include "base/json.h"
#include "api/native.h"
#include "base/par.h"
#include "file/pin.h"
#include "sampling/sampler.h"
#include "api/serve.h"
#include "base/sha256.h"
#include "text/template.h"
#include "text/tokenizer.h"
#include "file/verify.h"

#define ENGINE_STR "bankML " BANKML_VERSION " native: its own forward pass, token-identical to llama.cpp b11669 on its oracle"
#define NAT_MAX_STOPS 64

/* ------------------------------------------------------------------ pure rules */

size_t native_reuse(const int32_t *slot, size_t n_slot, const int32_t *prompt, size_t n_prompt,
                    int cache_prompt)
{
    size_t n = 0;
    if (!cache_prompt) return 0;
    while (n < n_slot && n < n_prompt && slot[n] == prompt[n]) n++;
    if (n == n_prompt && n > 0) n--;
    return n;
}

size_t native_utf8_complete(const char *s, size_t n)
{
    /* llama-server's validate_utf8: every one of the last 4 bytes is looked
     * at, and a lead byte whose sequence would run past the end makes the
     * text incomplete from there, even with ASCII after it ("\xE2)" holds
     * back both bytes). The probability entries and the streamed text wait
     * on the same answer. */
    for (size_t i = 1; i <= 4 && i <= n; i++) {
        unsigned char c = (unsigned char)s[n - i];
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (need > i) return n - i;
    }
    return n;
}

size_t native_partial_stop(const char *text, size_t n, const char *word, size_t wn)
{
    /* string_find_partial_stop: the longest suffix of text that is a prefix
     * of word; llama.cpp checks from the full word length down to 1 */
    if (!wn || !n) return (size_t)-1;
    char last = text[n - 1];
    for (size_t len = wn < n ? wn : n; len > 0; len--) {
        if (word[len - 1] != last) continue;
        if (!memcmp(text + n - len, word, len)) return n - len;
    }
    return (size_t)-1;
}

void native_stopper_init(native_stopper *s, const char *const *stops, const size_t *lens, size_t n)
{
    memset(s, 0, sizeof *s);
    jbuf_init(&s->text);
    s->stops = stops;
    s->stop_lens = lens;
    s->n_stops = n;
}

void native_stopper_free(native_stopper *s) { jbuf_free(&s->text); }

/* find_stopping_strings over text[pos..len): a full match searched in the
 * window the last token can have completed, or a partial one at the end. */
static size_t find_stop(native_stopper *s, size_t pos, size_t last_len, int full, size_t *which)
{
    size_t best = (size_t)-1;
    const char *t = s->text.p + pos;
    size_t n = s->text.len - pos;
    for (size_t i = 0; i < s->n_stops; i++) {
        const char *w = s->stops[i];
        size_t wn = s->stop_lens[i], p = (size_t)-1;
        if (full) {
            size_t tmp = wn + last_len, from = n > tmp ? n - tmp : 0;
            if (wn <= n)
                for (size_t k = from; k + wn <= n; k++)
                    if (!memcmp(t + k, w, wn)) { p = k; break; }
            if (wn == 0) p = from <= n ? from : (size_t)-1;
        } else {
            p = native_partial_stop(t, n, w, wn);
        }
        if (p != (size_t)-1 && (best == (size_t)-1 || p < best)) {
            best = p;
            if (which) *which = i;
        }
    }
    return best;
}

int native_stopper_push(native_stopper *s, const char *piece, size_t n, int is_eog,
                        const char **send, size_t *send_len)
{
    jbuf_put(&s->text, piece, n);
    *send = "";
    *send_len = 0;
    if (native_utf8_complete(s->text.p, s->text.len) < s->text.len) return 0;
    size_t pos = s->n_sent < s->text.len ? s->n_sent : s->text.len, which = 0;
    int send_text = 1;
    size_t sp = find_stop(s, pos, n, 1, &which);
    if (sp != (size_t)-1) {
        s->stopped = 1;
        s->stop_word = which;
        s->text.len = pos + sp;
        s->text.p[s->text.len] = 0;
        pos = s->n_sent < s->text.len ? s->n_sent : s->text.len;
    } else if (!is_eog) {
        send_text = find_stop(s, pos, n, 0, NULL) == (size_t)-1;
    }
    if (send_text) {
        *send = s->text.p + pos;
        *send_len = s->text.len - pos;
        s->n_sent += *send_len;
    }
    return 1;
}

void native_model_name(const char *file, char *out, size_t outlen)
{
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    size_t n = strlen(b);
    if (n > 5 && !strcasecmp(b + n - 5, ".gguf")) n -= 5;
    if (n >= outlen) n = outlen ? outlen - 1 : 0;
    for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)b[i]);
    if (outlen) out[n] = 0;
}

int native_name_matches(const char *file, const char *asked)
{
    char name[512];
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    native_model_name(file, name, sizeof name);
    size_t an = strlen(asked), nn = strlen(name);
    if (!strcasecmp(asked, b)) return 1;
    if (!strcasecmp(asked, name)) return 1;
    if (an == nn + 7 && !strncasecmp(asked, name, nn) && !strcasecmp(asked + nn, ":latest")) return 1;
    return 0;
}

void native_put_double(jbuf *b, double v)
{
    json_put_double(b, v);   /* nlohmann's dump(): Grisu2, not always the shortest form */
}

/* ------------------------------------------------------------------ models */

typedef struct {
    char name[256];            /* stem, lower-cased */
    char file[256];            /* base name */
    char path[4096];           /* where it is (as given for the startup model) */
    char fork[4096];           /* the FORK.json that pins it */
    int present;
} reg_entry;

/* One loaded model: everything the slot needs, verified and mapped. */
typedef struct {
    size_t idx;                /* registry entry */
    bankml_verified *ver;
    pin_ident ident;
    gguf_map map;
    fw_weights *fw_w;
    fw_seq *fw;
    tok_vocab *vocab;
    char *tmpl;
    size_t tmpl_len;
    char *bos_piece, *eos_piece;
    sampler_params defaults;
    int reasoning;             /* the template has a <think> block: llama-server parses the answer */
    int32_t *slot;             /* tokens held in the KV cache (fw_n_past of them) */
    size_t n_slot, cap_slot;
    char **pieces;             /* DRY's view of the vocabulary, built on first use */
    size_t *piece_lens;
    struct pc_entry *pc;       /* the host prompt cache, oldest first */
    size_t n_pc, cap_pc;
} nat_model;

static struct {
    reg_entry *reg;
    size_t n_reg;
    size_t def;                /* the startup model */
    nat_model *cur;
    int64_t expires_us;        /* 0: never */
    int64_t keep_alive_ms;     /* < 0: forever */
    pthread_mutex_t run;
    size_t n_ctx;
    int llama_threads, threads;
    par_pool *pool;
    int64_t hashed_at;
    char last_sha[65];
    char *last_verified_json;
    volatile int stop_reaper;
    int cache_on;              /* --cache-ram != 0 */
    size_t cache_limit;        /* bytes; 0 = no limit */
} eng = {.run = PTHREAD_MUTEX_INITIALIZER};

static void pc_clear(nat_model *m);

static void model_free(nat_model *m)
{
    if (!m) return;
    fw_seq_free(m->fw);
    fw_weights_close(m->fw_w);
    tok_free(m->vocab);
    m->vocab = NULL;
    gguf_map_close(&m->map);
    bankml_verified_free(m->ver);
    free(m->tmpl);
    free(m->bos_piece);
    free(m->eos_piece);
    sampler_params_free(&m->defaults);
    free(m->slot);
    free(m->pieces);            /* one block: the pointers, then the bytes */
    free(m->piece_lens);
    pc_clear(m);
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
 * gate before the next step. status: the HTTP status a refusal carries. */
static nat_model *model_open(const char *path, const char *fork, int *status, char *err, size_t errlen)
{
    nat_model *m = calloc(1, sizeof *m);
    fw_hparams hp;
    fw_opts o;
    char why[1024];
    pin_ident before;
    *status = 400;
    if (!m) {
        bk_err(err, errlen, "out of memory");
        *status = 500;
        return NULL;
    }
    if (pin_ident_of(path, &before) != 0) {
        bk_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        *status = 404;
        free(m);
        return NULL;
    }
    int rc = bankml_verify(path, fork, BANKML_ENGINE_MAINLINE, &m->ver, why, sizeof why);
    if (rc != BANKML_OK) {
        bk_err(err, errlen, "refuse: %s", why);
        free(m);
        return NULL;
    }
    snprintf(eng.last_sha, sizeof eng.last_sha, "%s", bankml_verified_sha256(m->ver));
    free(eng.last_verified_json);
    eng.last_verified_json = bankml_verified_json(m->ver);
    eng.hashed_at = (int64_t)time(NULL);
    const gguf_header *h = &m->ver->report.header;
    if (fw_plan(h, &hp, why, sizeof why) != 0) {
        bk_err(err, errlen, "%s: bankML's native forward pass does not play it: %s", path, why);
        goto fail;
    }
    if (gguf_map_open(path, &m->map, why, sizeof why) != 0) {
        bk_err(err, errlen, "%s", why);
        *status = 500;
        goto fail;
    }
    if (pin_ident_of(path, &m->ident) != 0 || !pin_ident_same(&before, &m->ident) ||
        !gguf_map_unchanged(&m->map, path)) {
        bk_err(err, errlen, "%s changed since bankml verified it: refused", path);
        *status = 503;
        goto fail;
    }
    m->vocab = tok_load_gguf(h, m->map.p, m->map.len, why, sizeof why);
    if (!m->vocab) {
        bk_err(err, errlen, "%s: %s", path, why);
        goto fail;
    }
    memset(&o, 0, sizeof o);
    o.llama_threads = eng.llama_threads;
    o.pool = eng.pool;
    o.n_threads = eng.threads;
    if (fw_weights_open(&m->fw_w, &m->map, h, &o, why, sizeof why) != 0 ||
        fw_seq_new(&m->fw, m->fw_w, eng.n_ctx, why, sizeof why) != 0) {
        bk_err(err, errlen, "%s: %s", path, why);
        *status = 500;
        goto fail;
    }
    size_t tl = 0;
    const char *t = gguf_kv_str(gguf_kv_find(h, "tokenizer.chat_template"), &tl);
    if (!t || !tl || (tl == 6 && !memcmp(t, "chatml", 6))) {
        t = template_chatml_fallback;
        tl = strlen(t);
    }
    m->tmpl = malloc(tl + 1);
    m->bos_piece = piece_str(m->vocab, tok_bos(m->vocab), 1);
    m->eos_piece = piece_str(m->vocab, tok_eos(m->vocab), 1);
    if (!m->tmpl || !m->bos_piece || !m->eos_piece || sampler_params_init(&m->defaults) != 0) {
        bk_err(err, errlen, "out of memory");
        *status = 500;
        goto fail;
    }
    memcpy(m->tmpl, t, tl);
    m->tmpl[tl] = 0;
    m->tmpl_len = tl;
    m->reasoning = strstr(m->tmpl, "<think>") != NULL;
    if (sampler_gguf_defaults(&m->defaults, h, why, sizeof why) != 0) {
        bk_err(err, errlen, "%s: %s", path, why);
        *status = 500;
        goto fail;
    }
    return m;
fail:
    model_free(m);
    return NULL;
}

/* ------------------------------------------------------------------ registry */

static int reg_add(const char *file, const char *path, const char *fork, int present)
{
    char name[256];
    native_model_name(file, name, sizeof name);
    for (size_t i = 0; i < eng.n_reg; i++)
        if (!strcmp(eng.reg[i].name, name)) return 0;      /* first entry for a name wins */
    reg_entry *r = realloc(eng.reg, (eng.n_reg + 1) * sizeof *r);
    if (!r) return -1;
    eng.reg = r;
    r = &eng.reg[eng.n_reg++];
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

/* Every .gguf pinned by the FORK.json at fork, looked for beside `near`
 * (the startup model's folder) then in dir. */
static void reg_add_fork(const char *fork, const char *near, const char *dir)
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
        reg_add(b, cand, fork, found);
    }
    json_free(doc);
    free(text);
}

static void reg_add_dir(const char *dir, const char *near)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    if (!d) return;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 10 && !strcmp(e->d_name + l - 10, ".FORK.json")) {
            char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn) break;
            names = nn;
            names[n] = strdup(e->d_name);
            if (names[n]) n++;
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        reg_add_fork(p, near, dir);
        free(names[i]);
    }
    free(names);
}

/* The registry entry a request's `model` names: empty is the startup
 * model; else a name, name:latest or file name, case-insensitively. */
static long reg_find(const char *asked)
{
    if (!asked || !*asked) return (long)eng.def;
    for (size_t i = 0; i < eng.n_reg; i++)
        if (native_name_matches(eng.reg[i].file, asked)) return (long)i;
    /* llama-server's clients often send the path they started it with */
    for (size_t i = 0; i < eng.n_reg; i++)
        if (!strcmp(eng.reg[i].path, asked)) return (long)i;
    return -1;
}

/* The model for registry entry idx, resident afterwards (the caller holds
 * eng.run). The resident one is reused when its file is unchanged; any
 * other is dropped first. */
static nat_model *acquire(size_t idx, int *status, char *err, size_t errlen)
{
    reg_entry *r = &eng.reg[idx];
    if (eng.cur && eng.cur->idx == idx) {
        pin_ident now;
        if (pin_ident_of(r->path, &now) == 0 && pin_ident_same(&now, &eng.cur->ident)) return eng.cur;
        model_free(eng.cur);
        eng.cur = NULL;
        *status = 503;
        bk_err(err, errlen, "%s changed since bankml verified it: unloaded, and refused; the next request verifies it again", r->file);
        return NULL;
    }
    model_free(eng.cur);
    eng.cur = NULL;
    if (!r->present) {
        *status = 404;
        bk_err(err, errlen, "%s is pinned but not on this machine", r->file);
        return NULL;
    }
    fprintf(stderr, "bankml serve: %s: verifying (guard, sha256 pin); loading it\n", r->name);
    eng.cur = model_open(r->path, r->fork, status, err, errlen);
    if (eng.cur) eng.cur->idx = idx;
    return eng.cur;
}

static void touch(void)
{
    eng.expires_us = eng.keep_alive_ms < 0 ? 0 : bk_mono_us() + eng.keep_alive_ms * 1000;
}

static void *reaper_main(void *arg)
{
    (void)arg;
    while (!eng.stop_reaper) {
        sleep(1);
        if (pthread_mutex_trylock(&eng.run) != 0) continue;
        if (eng.cur && eng.expires_us && bk_mono_us() > eng.expires_us) {
            fprintf(stderr, "bankml serve: %s: keep-alive expired; unloaded\n", eng.reg[eng.cur->idx].name);
            model_free(eng.cur);
            eng.cur = NULL;
        }
        pthread_mutex_unlock(&eng.run);
    }
    return NULL;
}

/* ------------------------------------------------------------------ DRY's vocabulary view */

static const char *vocab_piece(void *ctx, int32_t id, size_t *len)
{
    nat_model *m = ctx;
    if (!m->pieces) {
        int32_t n = tok_n_tokens(m->vocab);
        jbuf all;
        size_t *offs = calloc((size_t)n + 1, sizeof *offs);
        char err[128];
        jbuf_init(&all);
        for (int32_t i = 0; offs && i < n; i++) {
            offs[i] = all.len;
            tok_detokenize(m->vocab, &i, 1, 0, 1, &all, err, sizeof err);
        }
        if (!offs || all.oom) {
            free(offs);
            jbuf_free(&all);
            *len = 0;
            return "";
        }
        offs[n] = all.len;
        /* pointers first, bytes after, in one block */
        char **ptrs = malloc((size_t)n * sizeof *ptrs + all.len + 1);
        size_t *lens = malloc((size_t)n * sizeof *lens);
        if (!ptrs || !lens) {
            free(ptrs);
            free(lens);
            free(offs);
            jbuf_free(&all);
            *len = 0;
            return "";
        }
        char *bytes = (char *)(ptrs + n);
        if (all.len) memcpy(bytes, all.p, all.len);
        bytes[all.len] = 0;
        for (int32_t i = 0; i < n; i++) {
            ptrs[i] = bytes + offs[i];
            lens[i] = offs[i + 1] - offs[i];
        }
        free(offs);
        jbuf_free(&all);
        m->pieces = ptrs;
        m->piece_lens = lens;
    }
    if (id < 0 || id >= tok_n_tokens(m->vocab)) {
        *len = 0;
        return "";
    }
    *len = m->piece_lens[id];
    return m->pieces[id];
}

static int vocab_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n)
{
    nat_model *m = ctx;
    char err[128];
    return tok_tokenize(m->vocab, text, len, 0, 0, ids, n, err, sizeof err);
}

/* ------------------------------------------------------------------ one completion */

enum { STOP_NONE = 0, STOP_EOS, STOP_WORD, STOP_LIMIT };

typedef struct {
    int32_t id;
    float p;
} nprob;

/* One reported token (llama-server's completion_token_output). */
typedef struct {
    int32_t tok;
    float p;
    char *text;                /* text_to_send */
    size_t text_len;
    nprob *top;
    size_t n_top;
    int post;                  /* post_sampling_probs: "prob"/"top_probs" after the chain */
} tok_out;

typedef struct gen_req gen_req;
/* Called for each token whose text is complete (llama-server's partial
 * result). stop_now: the stop type already known when it is sent (a stop
 * word). Returns 0, or -1 to stop (the client is gone). */
typedef int (*step_fn)(gen_req *g, const tok_out *t, int stop_now);

struct gen_req {
    /* in */
    const int32_t *prompt;
    size_t n_prompt;
    sampler_params sp;
    int greedy;                /* the CLI's plain argmax, no sampler */
    int32_t n_predict;         /* -1: none */
    const char *stops[NAT_MAX_STOPS];
    size_t stop_lens[NAT_MAX_STOPS];
    size_t n_stops;
    int cache_prompt;
    int pc_done;               /* the host prompt cache was consulted already */
    step_fn on_step;
    void *ud;
    serve_req *http;           /* client-gone checks, or NULL */
    /* out */
    size_t n_cached, n_decoded, n_processed;
    int stop;
    int truncated;
    int gone;
    native_stopper st;
    int32_t *gen;              /* generated tokens (EOG included) */
    size_t n_gen;
    tok_out *probs;            /* when n_probs > 0: the reported tokens */
    size_t n_probs_out;
    int64_t t_start, t_prompt_last, t_gen_last, t_first_text;
};

static void gen_free(gen_req *g)
{
    native_stopper_free(&g->st);
    free(g->gen);
    for (size_t i = 0; i < g->n_probs_out; i++) {
        free(g->probs[i].text);
        free(g->probs[i].top);
    }
    free(g->probs);
    sampler_params_free(&g->sp);
}

/* ------------------------------------------------------------------ metrics */

/* What /metrics (llama-server's --metrics names) and /bankml/metrics report:
 * counters since start, the two rate buckets llama-server empties at each
 * scrape, and a ring of the last NAT_KEEP completions. Own lock, so a scrape
 * never waits for a generation. */
#define NAT_KEEP 256

typedef struct {
    int64_t at;                /* unix s */
    char model[256];
    size_t prompt, cached, completion;
    double prompt_ms, ttft_ms, eval_ms;   /* < 0: not measured */
    const char *finish;
} nat_record;

typedef struct {
    uint64_t count, steps, us;
} nat_bucket;

static struct {
    pthread_mutex_t mu;
    int64_t t_start;           /* unix s */
    nat_bucket prompt, predict, prompt_win, predict_win;
    uint64_t cached, n_decode, n_busy, n_tokens_max;
    int processing, deferred;
    nat_record ring[NAT_KEEP];
    size_t n_rec, head;        /* records kept; the next slot to write */
    uint64_t tot_prompt, tot_completion;
} met = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void bucket_add(nat_bucket *b, uint64_t n, uint64_t steps, uint64_t us)
{
    b->count += n;
    b->steps += steps;
    b->us += us;
}

static double bucket_rate(const nat_bucket *b) { return b->us ? (double)b->steps / (double)b->us * 1e6 : 0.0; }

static void met_busy(int delta_processing, int delta_deferred)
{
    pthread_mutex_lock(&met.mu);
    met.processing += delta_processing;
    met.deferred += delta_deferred;
    pthread_mutex_unlock(&met.mu);
}

/* One finished completion (run_completion's end), as llama-server counts it:
 * prompt tokens evaluated (cached ones apart), its decode calls, and the
 * generation rate over decode steps (the first token comes free with the
 * prompt). */
static void met_record(const nat_model *m, const gen_req *g, uint64_t n_calls, const char *finish)
{
    if (g->n_prompt == 0) return;
    int64_t tp = g->t_prompt_last ? g->t_prompt_last - g->t_start : -1;
    int64_t te = g->t_prompt_last && g->t_gen_last ? g->t_gen_last - g->t_prompt_last : -1;
    pthread_mutex_lock(&met.mu);
    if (tp >= 0) {
        bucket_add(&met.prompt, g->n_processed, g->n_processed, (uint64_t)tp);
        bucket_add(&met.prompt_win, g->n_processed, g->n_processed, (uint64_t)tp);
    }
    if (te >= 0 && g->n_decoded) {
        bucket_add(&met.predict, g->n_decoded, g->n_decoded - 1, (uint64_t)te);
        bucket_add(&met.predict_win, g->n_decoded, g->n_decoded - 1, (uint64_t)te);
    }
    met.cached += g->n_cached;
    met.n_decode += n_calls;
    met.n_busy += n_calls;
    if (m->n_slot > met.n_tokens_max) met.n_tokens_max = m->n_slot;
    met.tot_prompt += g->n_prompt;
    met.tot_completion += g->n_decoded;
    nat_record *r = &met.ring[met.head];
    memset(r, 0, sizeof *r);
    r->at = (int64_t)time(NULL);
    /* `bankml generate` opens its model without a registry */
    if (m->idx < eng.n_reg) native_model_name(eng.reg[m->idx].file, r->model, sizeof r->model);
    r->prompt = g->n_prompt;
    r->cached = g->n_cached;
    r->completion = g->n_decoded;
    r->prompt_ms = tp >= 0 ? (double)tp / 1e3 : -1;
    r->eval_ms = te >= 0 ? (double)te / 1e3 : -1;
    r->ttft_ms = g->t_first_text ? (double)(g->t_first_text - g->t_start) / 1e3 : -1;
    r->finish = finish;
    met.head = (met.head + 1) % NAT_KEEP;
    if (met.n_rec < NAT_KEEP) met.n_rec++;
    pthread_mutex_unlock(&met.mu);
}

static int slot_push(nat_model *m, const int32_t *ids, size_t n)
{
    if (m->n_slot + n > m->cap_slot) {
        size_t cap = m->cap_slot ? m->cap_slot : 256;
        while (cap < m->n_slot + n) cap *= 2;
        int32_t *p = realloc(m->slot, cap * sizeof *p);
        if (!p) return -1;
        m->slot = p;
        m->cap_slot = cap;
    }
    memcpy(m->slot + m->n_slot, ids, n * sizeof *ids);
    m->n_slot += n;
    return 0;
}

static int client_gone(gen_req *g)
{
    if (g->http && serve_client_gone(g->http)) {
        g->gone = 1;
        return 1;
    }
    return 0;
}

/* The slot's rules of llama-server b11669 (server-context.cpp): reuse, the
 * prompt in micro-batches, then one token per step with process_token's
 * stop-word, context and budget checks. 0, or -1 with a reason (the model
 * failed; the slot is then emptied). A client gone is not an error:
 * g->gone is set and the slot keeps what was computed. */
static void pc_select(nat_model *m, const int32_t *prompt, size_t n);

static int run_completion(nat_model *m, gen_req *g, char *err, size_t errlen)
{
    int32_t n_vocab = (int32_t)fw_weights_hp(m->fw_w)->n_vocab;
    size_t n_ctx = fw_n_ctx(m->fw);
    sampler *s = NULL;
    smp_token *work = NULL;
    sampler_prob *top = NULL;
    jbuf piece;
    int rc = -1;

    native_stopper_init(&g->st, g->stops, g->stop_lens, g->n_stops);
    uint64_t n_calls = 0;
    jbuf_init(&piece);
    g->t_start = bk_mono_us();
    if (g->n_prompt == 0) return 0;
    met_busy(1, 0);
    if (!g->greedy) {
        sampler_vocab sv = {m, vocab_piece, vocab_tokenize};
        s = sampler_new(&g->sp, n_vocab, &sv, NULL, 0, err, errlen);
        if (!s) {
            met_busy(-1, 0);
            return -1;
        }
    }
    if (g->sp.n_probs > 0) {
        work = malloc((size_t)n_vocab * sizeof *work);
        top = malloc((size_t)g->sp.n_probs * sizeof *top);
        if (!work || !top) {
            bk_err(err, errlen, "out of memory");
            goto done;
        }
    }
    if (!g->pc_done) pc_select(m, g->prompt, g->n_prompt);
    size_t n_past = native_reuse(m->slot, m->n_slot, g->prompt, g->n_prompt, g->cache_prompt);
    fw_truncate(m->fw, n_past);
    m->n_slot = n_past;
    g->n_cached = n_past;
    g->n_processed = g->n_prompt - n_past;
    for (size_t i = 0; s && i < g->n_prompt; i++)
        if (sampler_accept(s, g->prompt[i]) != 0) {
            bk_err(err, errlen, "out of memory");
            goto done;
        }
    for (size_t i = n_past; i < g->n_prompt;) {
        size_t n = g->n_prompt - i < 512 ? g->n_prompt - i : 512;
        n_calls++;
        if (fw_eval(m->fw, g->prompt + i, n, NULL, 0, err, errlen) != 0) goto fail_model;
        if (slot_push(m, g->prompt + i, n) != 0) goto fail_model;
        i += n;
        if (i < g->n_prompt && client_gone(g)) {
            fprintf(stderr, "bankml: the client went away; stopped after %zu of %zu prompt tokens (kept in the slot)\n",
                    i, g->n_prompt);
            rc = 0;
            goto done;
        }
    }
    for (;;) {
        const float *logits = fw_logits(m->fw);
        int32_t tok = s ? sampler_sample(s, logits) : fw_argmax(logits, (size_t)n_vocab);
        if (tok < 0) {
            bk_err(err, errlen, "the sampler could not draw a token");
            goto done;
        }
        if (s && sampler_accept(s, tok) != 0) {
            bk_err(err, errlen, "out of memory");
            goto done;
        }
        int64_t t_now = bk_mono_us();
        g->n_decoded++;
        if (g->n_decoded == 1) g->t_prompt_last = t_now;
        g->t_gen_last = t_now;
        int32_t *ng = realloc(g->gen, (g->n_gen + 1) * sizeof *ng);
        if (!ng) {
            bk_err(err, errlen, "out of memory");
            goto done;
        }
        g->gen = ng;
        g->gen[g->n_gen++] = tok;
        tok_out t = {tok, 1.0f, NULL, 0, NULL, 0, 0};
        size_t n_top = 0;
        if (g->sp.n_probs > 0 && g->sp.post_sampling_probs && s) {
            float cp = 0;   /* the chain's candidates, as llama-server's post_sampling_probs */
            n_top = sampler_post_probs(s, (size_t)g->sp.n_probs, tok, top, &cp);
            t.p = cp;
            t.post = 1;
        } else if (g->sp.n_probs > 0) {
            float cp = 0;
            n_top = sampler_token_probs(logits, n_vocab, (size_t)g->sp.n_probs, tok, work, top, &cp);
            t.p = cp;   /* found over the whole vocabulary, as llama-server does */
        }
        int is_eog = tok_is_eog(m->vocab, tok);
        jbuf_reset(&piece);
        tok_piece(m->vocab, tok, 0, &piece);
        const char *send;
        size_t send_len;
        int complete = native_stopper_push(&g->st, piece.p ? piece.p : "", piece.len, is_eog, &send, &send_len);
        if (g->st.stopped) g->stop = STOP_WORD;
        if (complete) {
            if (send_len && !g->t_first_text) g->t_first_text = bk_mono_us();
            t.text = malloc(send_len + 1);
            if (!t.text) {
                bk_err(err, errlen, "out of memory");
                goto done;
            }
            memcpy(t.text, send, send_len);
            t.text[send_len] = 0;
            t.text_len = send_len;
            if (n_top) {
                t.top = malloc(n_top * sizeof *t.top);
                if (!t.top) {
                    free(t.text);
                    bk_err(err, errlen, "out of memory");
                    goto done;
                }
                for (size_t i = 0; i < n_top; i++) t.top[i] = (nprob){top[i].id, top[i].p};
                t.n_top = n_top;
            }
            int cb = g->on_step ? g->on_step(g, &t, g->stop) : 0;
            if (g->sp.n_probs > 0) {
                tok_out *np = realloc(g->probs, (g->n_probs_out + 1) * sizeof *np);
                if (!np) {
                    free(t.text);
                    free(t.top);
                    bk_err(err, errlen, "out of memory");
                    goto done;
                }
                g->probs = np;
                g->probs[g->n_probs_out++] = t;
            } else {
                free(t.text);
                free(t.top);
            }
            if (cb != 0) {
                g->gone = 1;
                fprintf(stderr, "bankml: the client went away; stopped after %zu generated tokens\n", g->n_decoded);
                rc = 0;
                goto done;
            }
        }
        if (g->stop == STOP_NONE) {
            if (m->n_slot + 1 >= n_ctx) {
                g->truncated = 1;
                g->stop = STOP_LIMIT;
            } else if (g->n_predict != -1 && (int64_t)g->n_predict - (int64_t)g->n_decoded <= 0) {
                g->stop = STOP_LIMIT;
            }
        }
        if (is_eog) g->stop = STOP_EOS;
        if (g->stop != STOP_NONE) break;
        if (client_gone(g)) {
            fprintf(stderr, "bankml: the client went away; stopped after %zu generated tokens\n", g->n_decoded);
            break;
        }
        n_calls++;
        if (fw_decode(m->fw, tok, NULL, err, errlen) != 0) goto fail_model;
        if (slot_push(m, &tok, 1) != 0) goto fail_model;
    }
    rc = 0;
    goto done;
fail_model:
    fw_truncate(m->fw, 0);
    m->n_slot = 0;
done:
    if (rc == 0 && m->n_slot != fw_n_past(m->fw)) {   /* never let the two disagree */
        fw_truncate(m->fw, 0);
        m->n_slot = 0;
    }
    met_record(m, g, n_calls, rc != 0 ? "error" : g->gone ? "cancelled"
                              : g->stop == STOP_EOS || g->stop == STOP_WORD ? "stop" : "length");
    met_busy(-1, 0);
    par_pause(eng.pool);        /* the request is over: no spinning while idle */
    sampler_free(s);
    free(work);
    free(top);
    jbuf_free(&piece);
    return rc;
}

/* ------------------------------------------------------------------ the host prompt cache */

/* llama-server's server_prompt_cache (--cache-ram, on by default): when a
 * request would make the slot drop most of what it holds, the slot's cells
 * are saved to host memory first, and a saved prompt that serves the new
 * request better than the slot does is put back. Interleaved conversations
 * therefore resume where llama-server resumes them, which decides both
 * cache_n and the kernels of the prefill that follows. */
typedef struct pc_entry {
    int32_t *toks;
    size_t n;
    size_t size;               /* llama-server's state size for these cells: the limits count it */
    void *kv;                  /* fw_kv_save's bytes */
    size_t kv_len;
} pc_entry;

static size_t pc_lcp(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* llama_state_seq_get_size of one sequence of n cells in an f16 cache: the
 * stream and cell counts, each cell's position, seq count and seq id, then
 * per layer a type and row size header before the K rows and the V rows. */
static size_t pc_state_size(const nat_model *m, size_t n)
{
    const fw_hparams *hp = fw_weights_hp(m->fw_w);
    size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    return 4 + 4 + n * 12 + 8 + (size_t)hp->n_layer * 2 * (12 + n * kv_dim * 2);
}

static void pc_drop(nat_model *m, size_t i)
{
    free(m->pc[i].toks);
    free(m->pc[i].kv);
    memmove(m->pc + i, m->pc + i + 1, (m->n_pc - i - 1) * sizeof *m->pc);
    m->n_pc--;
}

static void pc_clear(nat_model *m)
{
    while (m->n_pc) pc_drop(m, m->n_pc - 1);
    free(m->pc);
    m->pc = NULL;
    m->cap_pc = 0;
}

static size_t pc_bytes(const nat_model *m)
{
    size_t t = 0;
    for (size_t i = 0; i < m->n_pc; i++) t += m->pc[i].size;
    return t;
}

static size_t pc_tokens(const nat_model *m)
{
    size_t t = 0;
    for (size_t i = 0; i < m->n_pc; i++) t += m->pc[i].n;
    return t;
}

/* server_prompt_cache::update: oldest out while over the byte limit, then
 * while over the token limit (n_ctx, raised to what the byte limit holds at
 * the cache's average bytes per token). */
static void pc_update(nat_model *m)
{
    if (eng.cache_limit > 0)
        while (m->n_pc && pc_bytes(m) > eng.cache_limit) pc_drop(m, 0);
    size_t nt = pc_tokens(m);
    float per_tok = (float)pc_bytes(m) / (float)(nt ? nt : 1);
    if (per_tok < 1.0f) per_tok = 1.0f;
    size_t limit_tokens = fw_n_ctx(m->fw), cur = limit_tokens;
    if (eng.cache_limit > 0) {
        size_t fit = (size_t)((float)eng.cache_limit / per_tok);
        if (fit > cur) cur = fit;
    }
    if (limit_tokens > 0)
        while (m->n_pc && pc_tokens(m) > cur) pc_drop(m, 0);
}

/* server_prompt_cache::alloc plus the copy: the slot's cells saved, unless
 * the slot is empty, an entry already holds it whole, or it alone exceeds
 * the limit. Entries the slot holds whole go; the oldest go until it fits. */
static void pc_save(nat_model *m)
{
    if (m->n_slot == 0) return;
    for (size_t i = 0; i < m->n_pc; i++)
        if (pc_lcp(m->pc[i].toks, m->pc[i].n, m->slot, m->n_slot) == m->n_slot) return;
    size_t size = pc_state_size(m, m->n_slot);
    if (eng.cache_limit > 0 && size > eng.cache_limit) {
        fprintf(stderr, "bankml serve: a %zu-token prompt state (%zu bytes) exceeds the prompt cache limit; not cached\n",
                m->n_slot, size);
        return;
    }
    for (size_t i = 0; i < m->n_pc;) {
        if (pc_lcp(m->pc[i].toks, m->pc[i].n, m->slot, m->n_slot) == m->pc[i].n) pc_drop(m, i);
        else i++;
    }
    if (eng.cache_limit > 0)
        while (m->n_pc && pc_bytes(m) + size > eng.cache_limit) pc_drop(m, 0);
    pc_entry e = {0};
    e.n = m->n_slot;
    e.size = size;
    e.kv_len = fw_kv_bytes(m->fw, e.n);
    e.toks = malloc(e.n * sizeof *e.toks);
    e.kv = malloc(e.kv_len ? e.kv_len : 1);
    if (m->n_pc == m->cap_pc) {
        size_t cap = m->cap_pc ? m->cap_pc * 2 : 8;
        pc_entry *np = realloc(m->pc, cap * sizeof *np);
        if (np) {
            m->pc = np;
            m->cap_pc = cap;
        }
    }
    if (!e.toks || !e.kv || m->n_pc == m->cap_pc || fw_kv_save(m->fw, e.n, e.kv, e.kv_len) != 0) {
        /* as llama-server on bad_alloc: shrink the limit to 40 % of what is held */
        free(e.toks);
        free(e.kv);
        size_t held = pc_bytes(m);
        eng.cache_limit = held * 2 / 5 > 1 ? held * 2 / 5 : 1;
        fprintf(stderr, "bankml serve: out of memory for the prompt cache; its limit is now %zu bytes\n",
                eng.cache_limit);
        pc_update(m);
        return;
    }
    memcpy(e.toks, m->slot, e.n * sizeof *e.toks);
    m->pc[m->n_pc++] = e;
}

/* server_prompt_cache::load: among the entries that keep at least a quarter
 * of themselves, the one that both keeps a larger fraction of itself and
 * covers a larger fraction of the prompt than the slot does (and than any
 * earlier such entry) replaces the slot. -1 when a restore failed. */
static int pc_load(nat_model *m, const int32_t *prompt, size_t n)
{
    size_t lcp = pc_lcp(m->slot, m->n_slot, prompt, n);
    float f_keep_best = m->n_slot ? (float)lcp / (float)m->n_slot : -1.0f;
    float f_sim_best = (float)lcp / (float)n;
    size_t best = (size_t)-1;
    for (size_t i = 0; i < m->n_pc; i++) {
        size_t l = pc_lcp(m->pc[i].toks, m->pc[i].n, prompt, n);
        float f_keep = (float)l / (float)m->pc[i].n;
        float f_sim = (float)l / (float)n;
        if (f_keep < 0.25f) continue;
        if (f_keep_best < f_keep && f_sim_best < f_sim) {
            f_keep_best = f_keep;
            f_sim_best = f_sim;
            best = i;
        }
    }
    if (best == (size_t)-1) return 0;
    pc_entry *e = &m->pc[best];
    if (fw_kv_restore(m->fw, e->n, e->kv, e->kv_len) != 0) return -1;
    free(m->slot);
    m->slot = e->toks;         /* the entry's tokens become the slot's */
    m->n_slot = m->cap_slot = e->n;
    e->toks = NULL;
    pc_drop(m, best);
    return 0;
}

/* get_available_slot's cache update for one slot (-np 1): when the slot is
 * empty, or shares no more than 10 % of the prompt (--slot-prompt-similarity
 * 0.1), or would keep less than half of its own tokens, the slot is saved
 * and the best saved prompt is loaded. Runs once per completion request,
 * before the context check, as in llama-server. */
static void pc_select(nat_model *m, const int32_t *prompt, size_t n)
{
    int update = 1;
    if (!eng.cache_on || n == 0) return;
    if (m->n_slot > 0) {
        size_t lcp = pc_lcp(m->slot, m->n_slot, prompt, n);
        float f_sim = (float)lcp / (float)n;
        if (f_sim > 0.0f && f_sim > 0.1f) {
            float f_keep = (f_sim * (float)n) / (float)m->n_slot;
            update = f_keep < 0.5f;
        }
    }
    if (!update) return;
    pc_save(m);
    if (pc_load(m, prompt, n) != 0) {
        fw_truncate(m->fw, 0);
        m->n_slot = 0;
    }
    pc_update(m);
}

/* ------------------------------------------------------------------ prompts */

/* The conversation through the model's template as llama-server renders it
 * (/apply-template), appended to out. */
static int render_messages(nat_model *m, const json_value *messages, jbuf *out, char *err, size_t errlen)
{
    template_opts o;
    template_opts_init(&o);
    o.bos_token = m->bos_piece;
    o.eos_token = m->eos_piece;
    o.add_bos = tok_add_bos(m->vocab);
    o.add_eos = tok_add_eos(m->vocab);
    return template_render(m->tmpl, m->tmpl_len, messages, &o, out, err, errlen);
}

/* The prompt's tokens: specials parsed, BOS/EOS added as the vocabulary
 * says (llama-server's tokenize_input_prompts). */
static int tokenize_prompt(nat_model *m, const char *text, size_t len, int32_t **ids, size_t *n,
                           char *err, size_t errlen)
{
    return tok_tokenize(m->vocab, text, len, 1, 1, ids, n, err, errlen);
}

/* ------------------------------------------------------------------ bankml generate */

static int arg_val(int argc, char **argv, const char *name, const char **out)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], name)) {
            if (i + 1 >= argc) return -1;
            *out = argv[i + 1];
            return 1;
        }
    return 0;
}

static int arg_flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

static const char *const value_opts[] = {"--max", "--temp", "--top-k", "--top-p", "--min-p", "--seed", "--fork",
                                         "--registry", "--ctx", "--listen", "--upstream", "--api-key",
                                         "--allow-origin", "--keep-alive", "--threads", "--llama-threads",
                                         "--host", "--port", "-t", "-c", NULL};

/* The first argument that is neither an option nor an option's value. */
static const char *first_positional(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        int takes = 0;
        for (size_t k = 0; value_opts[k]; k++)
            if (!strcmp(argv[i], value_opts[k])) takes = 1;
        if (takes) {
            i++;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1]) continue;
        return argv[i];
    }
    return NULL;
}

static int gen_cli_step(gen_req *g, const tok_out *t, int stop_now)
{
    (void)stop_now;
    if (!g->ud && t->text_len) {
        fwrite(t->text, 1, t->text_len, stdout);
        fflush(stdout);
    }
    return 0;
}

static int default_threads(void)
{
    const char *e = getenv("BANKML_THREADS");
    long n = e ? strtol(e, NULL, 10) : 0;
    if (n > 0 && n <= PAR_MAX_THREADS) return (int)n;
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n <= PAR_MAX_THREADS ? (int)n : 1;
}

int native_cmd_generate(int argc, char **argv)
{
    const char *model = first_positional(argc, argv), *v;
    const char *fork = "models.FORK.json";
    long max = 256;
    int json_out = arg_flag(argc, argv, "--json"), sample = arg_flag(argc, argv, "--sample");
    char err[1024];
    int status, rc = BANKML_REFUSE;
    gen_req g;
    jbuf in, prompt;
    json_value *doc = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;

    if (!model) {
        fprintf(stderr, "usage: bankml generate MODEL [--max N] [--json] [--sample [--temp T] [--top-k K] "
                        "[--top-p P] [--min-p P] [--seed S] [--typical-p P] [--top-n-sigma S] [--xtc-probability P] "
                        "[--xtc-threshold T] [--dynatemp-range R] [--dynatemp-exponent E] [--repeat-last-n N] "
                        "[--repeat-penalty P] [--frequency-penalty P] [--presence-penalty P] [--dry-multiplier M] "
                        "[--dry-base B] [--dry-allowed-length N] [--dry-penalty-last-n N] [--min-keep N]] [--fork F] "
                        "< messages.json|text\n");
        return BANKML_EXIT_IO;
    }
    if (arg_val(argc, argv, "--fork", &v) > 0) fork = v;
    if (arg_val(argc, argv, "--max", &v) > 0) {
        char *end;
        max = strtol(v, &end, 10);
        if (*end || max < 0) {
            fprintf(stderr, "bankml generate: --max wants a count, not %s\n", v);
            return BANKML_EXIT_IO;
        }
    }
    eng.n_ctx = json_out ? 4096 : 4096;
    eng.llama_threads = 2;
    eng.threads = default_threads();
    nat_model *m = model_open(model, fork, &status, err, sizeof err);
    if (!m) {
        fprintf(stderr, "bankml generate: %s\n", err);
        return status == 500 ? BANKML_EXIT_IO : BANKML_REFUSE;
    }
    memset(&g, 0, sizeof g);
    jbuf_init(&in);
    jbuf_init(&prompt);
    json_value *own = NULL;
    if (jbuf_read_stream(&in, stdin) != 0) {
        fprintf(stderr, "bankml generate: cannot read standard input: %s\n", strerror(errno));
        goto out;
    }
    /* a JSON array of messages, an object with "messages", or plain text (one user turn) */
    {
        size_t k = 0;
        while (k < in.len && isspace((unsigned char)in.p[k])) k++;
        if (k < in.len && (in.p[k] == '[' || in.p[k] == '{')) doc = json_parse(in.p, in.len, err, sizeof err);
    }
    const json_value *msgs = doc ? (doc->type == JSON_OBJECT ? json_get(doc, "messages") : doc) : NULL;
    if (!msgs) {
        jbuf t;
        jbuf_init(&t);
        jbuf_puts(&t, "[{\"role\": \"user\", \"content\": ");
        json_put_str(&t, in.p ? in.p : "", in.len);
        jbuf_puts(&t, "}]");
        own = json_parse(t.p, t.len, err, sizeof err);
        jbuf_free(&t);
        msgs = own;
    }
    if (!msgs || render_messages(m, msgs, &prompt, err, sizeof err) != 0 ||
        tokenize_prompt(m, prompt.p ? prompt.p : "", prompt.len, &ids, &n_ids, err, sizeof err) != 0) {
        fprintf(stderr, "bankml generate: %s\n", msgs ? err : "out of memory");
        goto out;
    }
    if (n_ids >= fw_n_ctx(m->fw)) {
        fprintf(stderr, "bankml generate: the prompt has %zu tokens; the context is %zu\n", n_ids, fw_n_ctx(m->fw));
        goto out;
    }
    g.greedy = !sample;
    if (!sample) {
        if (sampler_params_copy(&g.sp, &m->defaults) != 0) {
            fprintf(stderr, "bankml generate: out of memory\n");
            goto out;
        }
    } else {
        /* The flags become the request llama-server would get, resolved over
         * the GGUF's defaults with the server's own rules and refusals. */
        static const char *const flag_keys[][2] = {
            {"--temp", "temperature"}, {"--top-k", "top_k"}, {"--top-p", "top_p"}, {"--min-p", "min_p"},
            {"--seed", "seed"}, {"--typical-p", "typical_p"}, {"--top-n-sigma", "top_n_sigma"},
            {"--xtc-probability", "xtc_probability"}, {"--xtc-threshold", "xtc_threshold"},
            {"--dynatemp-range", "dynatemp_range"}, {"--dynatemp-exponent", "dynatemp_exponent"},
            {"--repeat-last-n", "repeat_last_n"}, {"--repeat-penalty", "repeat_penalty"},
            {"--frequency-penalty", "frequency_penalty"}, {"--presence-penalty", "presence_penalty"},
            {"--dry-multiplier", "dry_multiplier"}, {"--dry-base", "dry_base"},
            {"--dry-allowed-length", "dry_allowed_length"}, {"--dry-penalty-last-n", "dry_penalty_last_n"},
            {"--min-keep", "min_keep"},
        };
        jbuf rq;
        json_value *req;
        int bad = 0;
        jbuf_init(&rq);
        jbuf_putc(&rq, '{');
        for (size_t k = 0; k < sizeof flag_keys / sizeof flag_keys[0] && !bad; k++) {
            if (arg_val(argc, argv, flag_keys[k][0], &v) <= 0) continue;
            json_value *num = json_parse(v, strlen(v), err, sizeof err);
            if (!num || num->type != JSON_NUMBER) {
                fprintf(stderr, "bankml generate: %s wants a number, not %s\n", flag_keys[k][0], v);
                bad = 1;
            } else {
                if (rq.len > 1) jbuf_puts(&rq, ", ");
                json_put_cstr(&rq, flag_keys[k][1]);
                jbuf_printf(&rq, ": %s", v);
            }
            json_free(num);
        }
        jbuf_putc(&rq, '}');
        req = bad || rq.oom ? NULL : json_parse(rq.p, rq.len, err, sizeof err);
        jbuf_free(&rq);
        if (!req) {
            rc = BANKML_EXIT_IO;
            goto out;
        }
        int r = sampler_resolve(&g.sp, &m->defaults, req, err, sizeof err);
        json_free(req);
        if (r != 0) {
            fprintf(stderr, "bankml generate: %s\n", err);
            goto out;
        }
    }
    g.prompt = ids;
    g.n_prompt = n_ids;
    g.n_predict = (int32_t)(max > INT32_MAX ? INT32_MAX : max);
    g.cache_prompt = 1;
    g.on_step = gen_cli_step;
    g.ud = json_out ? (void *)1 : NULL;
    if (max == 0) {   /* the CLI's --max 0 asks for nothing */
        g.n_prompt = 0;
    }
    if (run_completion(m, &g, err, sizeof err) != 0) {
        fprintf(stderr, "bankml generate: %s\n", err);
        rc = BANKML_EXIT_IO;
        goto out;
    }
    if (json_out) {
        jbuf o;
        jbuf_init(&o);
        jbuf_puts(&o, "{\"content\": ");
        json_put_str(&o, g.st.text.p ? g.st.text.p : "", g.st.text.len);
        jbuf_printf(&o, ", \"prompt_tokens\": %zu, \"completion_tokens\": %zu, \"finish_reason\": \"%s\"}\n", n_ids,
                    g.n_decoded, g.stop == STOP_EOS || g.stop == STOP_WORD ? "stop" : "length");
        fwrite(o.p, 1, o.len, stdout);
        jbuf_free(&o);
    } else {
        /* bytes still held back as incomplete UTF-8 at the end */
        if (g.st.n_sent < g.st.text.len) fwrite(g.st.text.p + g.st.n_sent, 1, g.st.text.len - g.st.n_sent, stdout);
        fputc('\n', stdout);
    }
    rc = BANKML_OK;
out:
    gen_free(&g);
    free(ids);
    json_free(doc);
    json_free(own);
    jbuf_free(&in);
    jbuf_free(&prompt);
    model_free(m);
    return rc;
}

/* ------------------------------------------------------------------ HTTP: helpers */

#define FINGERPRINT "bankml-" BANKML_VERSION

static const char *g_fork_default = "models.FORK.json";

static void put_sha_hex(jbuf *b, const void *p, size_t n)
{
    uint8_t d[32];
    char hex[65];
    sha256(p, n, d);
    sha256_hex(d, hex);
    json_put_cstr(b, hex);
}

static void random_id(char *out, size_t n)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[64];
    if (n > sizeof r + 1) n = sizeof r + 1;
    if (getrandom(r, n - 1, 0) != (ssize_t)(n - 1))
        for (size_t i = 0; i + 1 < n; i++) r[i] = (unsigned char)rand();
    for (size_t i = 0; i + 1 < n; i++) out[i] = al[r[i] % 62];
    out[n - 1] = 0;
}

static int reply_err(serve_resp *resp, int code, const char *msg)
{
    return serve_reply_error(resp, code, NULL, msg, NULL);
}

/* The request's JSON, or NULL after answering 400: first as llama-server's
 * nlohmann parser would take it (its exact error text; a byte order mark
 * skipped), then json.c's tree (whose own refusal remains for what only it
 * refuses, such as nesting past JSON_MAX_DEPTH). */
static json_value *parse_body(serve_req *req, serve_resp *resp)
{
    char err[512];
    const char *text = req->body ? req->body : "";
    size_t a = 0, z = req->body_len;
    jbuf why;
    jbuf_init(&why);
    int rc = serve_llama_json_check(text, req->body_len, &why, &a, &z);
    if (rc == 1) {
        reply_err(resp, 400, why.oom ? "invalid JSON" : why.p);
        jbuf_free(&why);
        return NULL;
    }
    jbuf_free(&why);
    if (rc != 0) {
        a = 0;
        z = req->body_len;
    }
    json_value *doc = json_parse(text + a, z - a, err, sizeof err);
    if (!doc) reply_err(resp, 400, err);
    return doc;
}

static const char *jtype(const json_value *v)
{
    switch (v->type) {
    case JSON_NULL: return "null";
    case JSON_FALSE: case JSON_TRUE: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    default: return "object";
    }
}

/* field_bool of llama-server's schema: null is absent. */
static int field_bool(const json_value *o, const char *name, int *val, char *err, size_t errlen)
{
    const json_value *v = json_get(o, name);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_TRUE && v->type != JSON_FALSE) {
        bk_err(err, errlen, "Field '%s': [json.exception.type_error.302] type must be boolean, but is %s", name,
                jtype(v));
        return -1;
    }
    *val = v->type == JSON_TRUE;
    return 0;
}

/* A field_num<int32_t> of llama-server's schema with hard limits: the first
 * present (non-null) name of names[] is read as nlohmann's get<int32_t>
 * reads it (booleans as 0/1, fractions truncated, other integers wrapped),
 * then refused outside [lo, hi] with llama-server's message. */
static int field_i32(const json_value *o, const char *const *names, int n_names, int32_t lo, int32_t hi,
                     int32_t *val, char *err, size_t errlen)
{
    for (int k = 0; k < n_names; k++) {
        const json_value *v = json_get(o, names[k]);
        if (!v || v->type == JSON_NULL) continue;
        int64_t x;
        if (v->type == JSON_TRUE || v->type == JSON_FALSE) {
            x = v->type == JSON_TRUE;
        } else if (v->type != JSON_NUMBER) {
            bk_err(err, errlen, "Field '%s': [json.exception.type_error.302] type must be number, but is %s",
                    names[k], jtype(v));
            return -1;
        } else if (!json_as_i64(v, &x)) {
            double d = strtod(v->str, NULL);
            x = d > -2147483649.0 && d < 2147483648.0 ? (int64_t)d : INT32_MIN;
        } else if (x < INT32_MIN || x > INT32_MAX) {
            x = (int32_t)(uint32_t)(uint64_t)x;
        }
        if (x < lo || x > hi) {
            bk_err(err, errlen, "Field '%s': Value must be between %d <= value <= %d, but got %d", names[k],
                    (int)lo, (int)hi, (int)x);
            return -1;
        }
        *val = (int32_t)x;
        return 0;
    }
    return 0;
}

/* n_predict with its aliases and hard limits [-1, INT32_MAX]. */
static int field_n_predict(const json_value *o, int32_t *val, char *err, size_t errlen)
{
    static const char *const names[] = {"n_predict", "max_completion_tokens", "max_tokens"};
    return field_i32(o, names, 3, -1, INT32_MAX, val, err, errlen);
}

/* n_cmpl (alias n): completions per prompt, at most the slot count, which
 * is one here, as llama-server -np 1 limits it. */
static int field_n_cmpl(const json_value *o, char *err, size_t errlen)
{
    static const char *const names[] = {"n_cmpl", "n"};
    int32_t n = 1;
    return field_i32(o, names, 2, 1, 1, &n, err, errlen);
}

/* v as nlohmann::ordered_json's dump() prints it, which llama-server puts
 * in some of its error messages: no spaces, members in their order,
 * integers as written, other numbers as its doubles, strings with
 * \b \f \n \r \t and \u00xx for the other control bytes. */
static void put_nl_dump(jbuf *b, const json_value *v)
{
    switch (v->type) {
    case JSON_NULL: jbuf_puts(b, "null"); return;
    case JSON_FALSE: jbuf_puts(b, "false"); return;
    case JSON_TRUE: jbuf_puts(b, "true"); return;
    case JSON_NUMBER: {
        int64_t x;
        /* nlohmann keeps a literal without '.', 'e' or 'E' as an integer
         * when it fits (uint64 for positive values), else a double */
        if (!strpbrk(v->str, ".eE")) {
            if (json_as_i64(v, &x)) {
                jbuf_printf(b, "%lld", (long long)x);
                return;
            }
            if (v->str[0] != '-') {
                errno = 0;
                unsigned long long u = strtoull(v->str, NULL, 10);
                if (errno == 0) {
                    jbuf_printf(b, "%llu", u);
                    return;
                }
            }
        }
        json_put_double(b, strtod(v->str, NULL));
        return;
    }
    case JSON_STRING:
        jbuf_putc(b, '"');
        for (size_t i = 0; i < v->len; i++) {
            unsigned char c = (unsigned char)v->str[i];
            switch (c) {
            case '"': jbuf_puts(b, "\\\""); break;
            case '\\': jbuf_puts(b, "\\\\"); break;
            case '\b': jbuf_puts(b, "\\b"); break;
            case '\f': jbuf_puts(b, "\\f"); break;
            case '\n': jbuf_puts(b, "\\n"); break;
            case '\r': jbuf_puts(b, "\\r"); break;
            case '\t': jbuf_puts(b, "\\t"); break;
            default:
                if (c < 0x20) jbuf_printf(b, "\\u%04x", c);
                else jbuf_putc(b, (char)c);
            }
        }
        jbuf_putc(b, '"');
        return;
    case JSON_ARRAY:
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i) jbuf_putc(b, ',');
            put_nl_dump(b, v->items[i]);
        }
        jbuf_putc(b, ']');
        return;
    case JSON_OBJECT:
        jbuf_putc(b, '{');
        for (size_t i = 0; i < v->n; i++) {
            json_value k = {.type = JSON_STRING, .str = v->keys[i], .len = v->key_lens[i]};
            if (i) jbuf_putc(b, ',');
            put_nl_dump(b, &k);
            jbuf_putc(b, ':');
            put_nl_dump(b, v->items[i]);
        }
        jbuf_putc(b, '}');
        return;
    }
}

static int jis(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* The checks llama-server makes on `messages` before any template runs
 * (oaicompat_chat_params_parse, then common_chat_msgs_parse_oaicompat), in
 * its order and with its words, so a malformed conversation gets the same
 * status and body: 400 for its invalid_argument, 500 for the ones it wraps
 * in "Failed to parse messages: ". 0 when llama-server would go on (the
 * template may still refuse what bankml cannot render). msgs is an array. */
static int check_oai_messages(const json_value *msgs, int *status, char *err, size_t errlen)
{
    *status = 400;
    for (size_t i = 0; i < msgs->n; i++) {
        const json_value *m = msgs->items[i];
        const json_value *role = json_get(m, "role"), *content = json_get(m, "content");
        /* json_value(msg, "role", ""): a role of another type reads as "" */
        if (!jis(role, "assistant") && !content) {
            bk_err(err, errlen, "All non-assistant messages must contain 'content'");
            return -1;
        }
        if (jis(role, "assistant") && !content) {
            if (json_get(m, "tool_calls")) continue;
            bk_err(err, errlen, "Assistant message must contain either 'content' or 'tool_calls'!");
            return -1;
        }
        if (content->type == JSON_STRING || content->type == JSON_NULL) continue;
        if (content->type != JSON_ARRAY) {
            bk_err(err, errlen, "Expected 'content' to be a string or an array");
            return -1;
        }
        for (size_t k = 0; k < content->n; k++) {
            const json_value *ty = json_get(content->items[k], "type");
            static const char *const media[][2] = {{"image_url", "image"}, {"input_audio", "audio"},
                                                   {"input_video", "video"}, {"video_url", "video"}};
            for (size_t j = 0; j < sizeof media / sizeof media[0]; j++)
                if (jis(ty, media[j][0])) {
                    *status = 500;
                    bk_err(err, errlen, "%s input is not supported - hint: if this is unexpected, you may need "
                                         "to provide the mmproj", media[j][1]);
                    return -1;
                }
            if (!jis(ty, "text")) {
                bk_err(err, errlen, "unsupported content[].type");
                return -1;
            }
        }
    }
    /* common_chat_msgs_parse_oaicompat: every failure is a 500 */
    *status = 500;
    for (size_t i = 0; i < msgs->n; i++) {
        const json_value *m = msgs->items[i], *role = json_get(m, "role"), *content = json_get(m, "content");
        if (!role) {
            jbuf d;
            jbuf_init(&d);
            put_nl_dump(&d, m);
            bk_err(err, errlen, "Failed to parse messages: Missing 'role' in message: %s", d.p ? d.p : "");
            jbuf_free(&d);
            return -1;
        }
        if (role->type != JSON_STRING) {
            bk_err(err, errlen, "Failed to parse messages: [json.exception.type_error.302] type must be string, "
                                 "but is %s", jtype(role));
            return -1;
        }
        for (size_t k = 0; content && content->type == JSON_ARRAY && k < content->n; k++) {
            const json_value *t = json_get(content->items[k], "text");
            if (!t) {
                bk_err(err, errlen, "Failed to parse messages: [json.exception.out_of_range.403] key 'text' "
                                     "not found");
                return -1;
            }
            if (t->type != JSON_STRING) {
                bk_err(err, errlen, "Failed to parse messages: [json.exception.type_error.302] type must be "
                                     "string, but is %s", jtype(t));
                return -1;
            }
        }
        static const char *const strs[] = {"reasoning_content", "name", "tool_call_id"};
        for (size_t j = 0; j < 3; j++) {
            const json_value *v = json_get(m, strs[j]);
            if (v && v->type != JSON_STRING) {
                bk_err(err, errlen, "Failed to parse messages: [json.exception.type_error.302] type must be "
                                     "string, but is %s", jtype(v));
                return -1;
            }
        }
    }
    return 0;
}

/* The request's fields in llama-server's schema order: stream,
 * stream_options, cache_prompt, n_predict, n_cmpl, then the sampler's. */
typedef struct {
    int stream, include_usage, cache_prompt;
    int32_t n_predict;
} req_opts;

static int read_opts(nat_model *m, const json_value *body, req_opts *o, gen_req *g, char *err, size_t errlen)
{
    o->stream = 0;
    o->include_usage = 0;
    o->cache_prompt = 1;
    o->n_predict = -1;
    if (field_bool(body, "stream", &o->stream, err, errlen)) return -1;
    const json_value *so = json_get(body, "stream_options");
    if (so && so->type == JSON_OBJECT && field_bool(so, "include_usage", &o->include_usage, err, errlen)) return -1;
    if (field_bool(body, "cache_prompt", &o->cache_prompt, err, errlen)) return -1;
    if (field_n_predict(body, &o->n_predict, err, errlen)) return -1;
    if (field_n_cmpl(body, err, errlen)) return -1;
    if (sampler_resolve(&g->sp, &m->defaults, body, err, errlen) != 0) return -1;
    /* stop: a string, or an array of strings (anything else: none, as json_value's default) */
    const json_value *st = json_get(body, "stop");
    if (st && st->type == JSON_STRING && st->len) {
        g->stops[0] = st->str;
        g->stop_lens[0] = st->len;
        g->n_stops = 1;
    } else if (st && st->type == JSON_ARRAY) {
        int all = 1;
        for (size_t i = 0; i < st->n; i++) all &= st->items[i]->type == JSON_STRING;
        for (size_t i = 0; all && i < st->n && g->n_stops < NAT_MAX_STOPS; i++)
            if (st->items[i]->len) {
                g->stops[g->n_stops] = st->items[i]->str;
                g->stop_lens[g->n_stops++] = st->items[i]->len;
            }
    }
    g->n_predict = o->n_predict;
    g->cache_prompt = o->cache_prompt;
    return 0;
}

static void put_timings(jbuf *b, const gen_req *g)
{
    double pms = g->t_prompt_last ? (double)(g->t_prompt_last - g->t_start) / 1000.0 : 0.0;
    int64_t gus = g->t_gen_last ? (g->t_gen_last - g->t_prompt_last > 1 ? g->t_gen_last - g->t_prompt_last : 1) : 0;
    double gms = (double)gus / 1000.0;
    size_t steps = g->n_decoded > 0 ? g->n_decoded - 1 : 0;
    jbuf_printf(b, "{\"cache_n\":%zu,\"prompt_n\":%zu,\"prompt_ms\":", g->n_cached, g->n_processed);
    native_put_double(b, pms);
    jbuf_puts(b, ",\"prompt_per_token_ms\":");
    native_put_double(b, g->n_processed ? pms / (double)g->n_processed : 0.0);
    jbuf_puts(b, ",\"prompt_per_second\":");
    native_put_double(b, pms > 0 ? 1e3 / pms * (double)g->n_processed : 0.0);
    jbuf_printf(b, ",\"predicted_n\":%zu,\"predicted_ms\":", g->n_decoded);
    native_put_double(b, gms);
    jbuf_puts(b, ",\"predicted_per_token_ms\":");
    native_put_double(b, steps ? gms / (double)steps : 0.0);
    jbuf_puts(b, ",\"predicted_per_second\":");
    native_put_double(b, gms > 0 ? 1e3 / gms * (double)steps : 0.0);
    jbuf_putc(b, '}');
}

static void put_usage(jbuf *b, const gen_req *g)
{
    jbuf_printf(b, "{\"completion_tokens\":%zu,\"prompt_tokens\":%zu,\"total_tokens\":%zu,"
                   "\"prompt_tokens_details\":{\"cached_tokens\":%zu}}",
                g->n_decoded, g->n_prompt, g->n_decoded + g->n_prompt, g->n_cached);
}

/* A token's text as llama-server prints it: cut at an incomplete UTF-8 end
 * (validate_utf8), other bytes as they are. */
static void put_tok_text(jbuf *b, const char *s, size_t n)
{
    json_put_str(b, s, native_utf8_complete(s, n));
}

static void put_bytes(jbuf *b, const char *s, size_t n)
{
    jbuf_putc(b, '[');
    for (size_t i = 0; i < n; i++) jbuf_printf(b, i ? ",%u" : "%u", (unsigned char)s[i]);
    jbuf_putc(b, ']');
}

static void put_logprob(jbuf *b, float p)
{
    native_put_double(b, (double)(p == 0.0f ? -FLT_MAX : logf(p)));
}

/* probs_vector_to_json over tokens [a, z). */
static void put_probs(jbuf *b, nat_model *m, const tok_out *t, size_t a, size_t z)
{
    jbuf piece;
    jbuf_init(&piece);
    jbuf_putc(b, '[');
    for (size_t i = a; i < z; i++) {
        if (i > a) jbuf_putc(b, ',');
        jbuf_printf(b, "{\"id\":%d,\"token\":", (int)t[i].tok);
        put_tok_text(b, t[i].text, t[i].text_len);
        jbuf_puts(b, ",\"bytes\":");
        put_bytes(b, t[i].text, t[i].text_len);
        if (t[i].post) {
            jbuf_puts(b, ",\"prob\":");
            native_put_double(b, (double)t[i].p);
            jbuf_puts(b, ",\"top_probs\":[");
        } else {
            jbuf_puts(b, ",\"logprob\":");
            put_logprob(b, t[i].p);
            jbuf_puts(b, ",\"top_logprobs\":[");
        }
        for (size_t k = 0; k < t[i].n_top; k++) {
            jbuf_reset(&piece);
            tok_piece(m->vocab, t[i].top[k].id, 0, &piece);
            const char *ps = piece.p ? piece.p : "";
            jbuf_printf(b, "%s{\"id\":%d,\"token\":", k ? "," : "", (int)t[i].top[k].id);
            put_tok_text(b, ps, piece.len);
            jbuf_puts(b, ",\"bytes\":");
            put_bytes(b, ps, piece.len);
            if (t[i].post) {
                jbuf_puts(b, ",\"prob\":");
                native_put_double(b, (double)t[i].top[k].p);
            } else {
                jbuf_puts(b, ",\"logprob\":");
                put_logprob(b, t[i].top[k].p);
            }
            jbuf_putc(b, '}');
        }
        jbuf_puts(b, "]}");
    }
    jbuf_putc(b, ']');
    jbuf_free(&piece);
}

/* The answer's message content as llama-server's chat parser gives it.
 * Templates with a <think> block get a parser that trims the content's
 * surrounding whitespace (a whitespace-only answer parses to nothing);
 * the others are content-only. */
static void parsed_content(const nat_model *m, const char *s, size_t n, const char **out, size_t *len)
{
    if (m->reasoning) {
        while (n && isspace((unsigned char)*s)) s++, n--;
        while (n && isspace((unsigned char)s[n - 1])) n--;
    }
    *out = s;
    *len = n;
}

static const char *finish_of(const gen_req *g)
{
    return g->stop == STOP_EOS || g->stop == STOP_WORD ? "stop" : "length";
}

static void put_receipt(jbuf *b, const nat_model *m, const gen_req *g, serve_req *req, const char *text, size_t tn,
                        const char *lp, size_t lpn, int has_lp)
{
    jbuf_puts(b, "{\"bankml\":\"" BANKML_VERSION "\",\"engine\":\"" ENGINE_STR "\",\"model_sha256\":");
    json_put_cstr(b, bankml_verified_sha256(m->ver));
    jbuf_printf(b, ",\"guard\":\"play\",\"prompt_tokens\":%zu,\"completion_tokens\":%zu,\"ttft_ms\":", g->n_prompt,
                g->n_decoded);
    if (g->t_first_text) jbuf_printf(b, "%lld", (long long)((g->t_first_text - g->t_start) / 1000));
    else jbuf_puts(b, "null");
    jbuf_printf(b, ",\"wall_ms\":%lld,\"response_sha256\":", (long long)serve_req_age_ms(req));
    put_sha_hex(b, text, tn);
    jbuf_puts(b, ",\"request_sha256\":");
    put_sha_hex(b, req->body ? req->body : "", req->body_len);
    if (has_lp) {
        jbuf_puts(b, ",\"logprobs_sha256\":");
        put_sha_hex(b, lp, lpn);
    }
    jbuf_puts(b, ",\"signed\":false}");
}

static const char *sampler_name(int s)
{
    switch (s) {
    case SMP_DRY: return "dry";
    case SMP_TOP_K: return "top_k";
    case SMP_TOP_P: return "top_p";
    case SMP_MIN_P: return "min_p";
    case SMP_TYPICAL_P: return "typ_p";
    case SMP_TEMPERATURE: return "temperature";
    case SMP_XTC: return "xtc";
    case SMP_INFILL: return "infill";
    case SMP_PENALTIES: return "penalties";
    case SMP_TOP_N_SIGMA: return "top_n_sigma";
    default: return "adaptive_p";
    }
}

static void putf(jbuf *b, const char *key, float v)
{
    jbuf_printf(b, ",\"%s\":", key);
    native_put_double(b, (double)v);
}

/* task_params::to_json as /completion prints generation_settings. */
static void put_gen_settings(jbuf *b, const gen_req *g, int stream)
{
    const sampler_params *p = &g->sp;
    jbuf_printf(b, "{\"seed\":%u", p->seed);
    putf(b, "temperature", p->temp);
    putf(b, "dynatemp_range", p->dynatemp_range);
    putf(b, "dynatemp_exponent", p->dynatemp_exponent);
    jbuf_printf(b, ",\"top_k\":%d", (int)p->top_k);
    putf(b, "top_p", p->top_p);
    putf(b, "min_p", p->min_p);
    putf(b, "top_n_sigma", p->top_n_sigma);
    putf(b, "xtc_probability", p->xtc_probability);
    putf(b, "xtc_threshold", p->xtc_threshold);
    putf(b, "typical_p", p->typ_p);
    jbuf_printf(b, ",\"repeat_last_n\":%d", (int)p->penalty_last_n);
    putf(b, "repeat_penalty", p->penalty_repeat);
    putf(b, "presence_penalty", p->penalty_present);
    putf(b, "frequency_penalty", p->penalty_freq);
    putf(b, "dry_multiplier", p->dry_multiplier);
    putf(b, "dry_base", p->dry_base);
    jbuf_printf(b, ",\"dry_allowed_length\":%d,\"dry_penalty_last_n\":%d,\"dry_sequence_breakers\":[",
                (int)p->dry_allowed_length, (int)p->dry_penalty_last_n);
    for (size_t i = 0; i < p->n_dry_breakers; i++) {
        if (i) jbuf_putc(b, ',');
        json_put_str(b, p->dry_breakers[i], p->dry_breaker_lens[i]);
    }
    jbuf_printf(b, "],\"mirostat\":%d", (int)p->mirostat);
    putf(b, "mirostat_tau", p->mirostat_tau);
    putf(b, "mirostat_eta", p->mirostat_eta);
    putf(b, "adaptive_target", p->adaptive_target);
    putf(b, "adaptive_decay", p->adaptive_decay);
    jbuf_puts(b, ",\"stop\":[");
    for (size_t i = 0; i < g->n_stops; i++) {
        if (i) jbuf_putc(b, ',');
        json_put_str(b, g->stops[i], g->stop_lens[i]);
    }
    jbuf_printf(b, "],\"max_tokens\":%d,\"n_predict\":%d,\"n_keep\":0,\"n_discard\":0,\"ignore_eos\":false,"
                   "\"stream\":%s,\"logit_bias\":[],\"n_probs\":%d,\"min_keep\":%d,\"grammar\":\"\","
                   "\"grammar_lazy\":false,\"grammar_triggers\":[],\"preserved_tokens\":[],"
                   "\"chat_format\":\"Content-only\",\"reasoning_format\":\"deepseek\",\"reasoning_in_content\":false,"
                   "\"generation_prompt\":\"\",\"samplers\":[",
                (int)g->n_predict, (int)g->n_predict, stream ? "true" : "false", (int)p->n_probs, (int)p->min_keep);
    for (size_t i = 0; i < p->n_order; i++) jbuf_printf(b, "%s\"%s\"", i ? "," : "", sampler_name(p->order[i]));
    jbuf_printf(b, "],\"speculative.types\":\"none\",\"timings_per_token\":false,\"post_sampling_probs\":%s,"
                   "\"backend_sampling\":false,\"lora\":[]}",
                p->post_sampling_probs ? "true" : "false");
}

/* ------------------------------------------------------------------ HTTP: completions */

typedef struct {
    serve_resp *resp;
    serve_req *req;
    nat_model *m;
    int chat, stream, began, has_new_line;
    char id[48];
    long long created;
    const char *model_name;
    jbuf raw;                  /* text sent so far (partials) */
    jbuf sent;                 /* parsed content sent so far (chat deltas) */
    jbuf lp;                   /* streamed logprobs entries joined (receipt) */
    size_t n_lp;
    jbuf ev;
} sctx;

static int stream_begin(sctx *c)
{
    if (c->began) return 0;
    c->began = 1;
    return serve_sse_begin(c->resp);
}

static int send_event(sctx *c)
{
    if (stream_begin(c) != 0) return -1;
    return serve_sse_event(c->resp, c->ev.p, c->ev.len);
}

static void chunk_head(sctx *c)
{
    jbuf_reset(&c->ev);
    jbuf_puts(&c->ev, "{\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":");
}

static void chunk_tail(sctx *c)
{
    jbuf_printf(&c->ev, ",\"created\":%lld,\"id\":\"%s\",\"model\":", c->created, c->id);
    json_put_cstr(&c->ev, c->model_name);
    jbuf_puts(&c->ev, ",\"system_fingerprint\":\"" FINGERPRINT "\",\"object\":\"chat.completion.chunk\"");
}

/* A partial result (one token), as llama-server streams it. */
static int on_step_http(gen_req *g, const tok_out *t, int stop_now)
{
    sctx *c = g->ud;
    if (memchr(t->text, '\n', t->text_len)) c->has_new_line = 1;
    if (!c->stream) return serve_client_gone(c->req) ? -1 : 0;
    jbuf_put(&c->raw, t->text, t->text_len);
    if (!c->chat) {
        jbuf_reset(&c->ev);
        jbuf_puts(&c->ev, "{\"index\":0,\"content\":");
        json_put_str(&c->ev, t->text, t->text_len);
        jbuf_printf(&c->ev, ",\"tokens\":[%d],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":%zu,"
                            "\"tokens_evaluated\":%zu", (int)t->tok, g->n_decoded, g->n_prompt);
        if (stop_now) {
            jbuf_puts(&c->ev, ",\"timings\":");
            put_timings(&c->ev, g);
        }
        if (g->sp.n_probs > 0) {
            jbuf_puts(&c->ev, ",\"completion_probabilities\":");
            put_probs(&c->ev, c->m, t, 0, 1);
        }
        jbuf_putc(&c->ev, '}');
        return send_event(c);
    }
    /* chat: a role delta first, then the parsed content's growth */
    const char *p;
    size_t n;
    int have_delta = 0;
    jbuf delta;
    jbuf_init(&delta);
    parsed_content(c->m, c->raw.p ? c->raw.p : "", c->raw.len, &p, &n);
    if (n > c->sent.len && !memcmp(p, c->sent.p ? c->sent.p : "", c->sent.len)) {
        jbuf_puts(&delta, "{\"content\":");
        json_put_str(&delta, p + c->sent.len, n - c->sent.len);
        jbuf_putc(&delta, '}');
        jbuf_put(&c->sent, p + c->sent.len, n - c->sent.len);
        have_delta = 1;
    }
    int rc = 0;
    if (g->n_decoded == 1) {
        chunk_head(c);
        jbuf_puts(&c->ev, "{\"role\":\"assistant\",\"content\":null}");
        if (!have_delta) goto extras;
        jbuf_puts(&c->ev, "}]");
        chunk_tail(c);
        jbuf_putc(&c->ev, '}');
        if (send_event(c) != 0) rc = -1;
    }
    if (!have_delta) goto done;
    chunk_head(c);
    jbuf_put(&c->ev, delta.p, delta.len);
extras:
    if (g->sp.n_probs > 0) {
        jbuf_puts(&c->ev, ",\"logprobs\":{\"content\":");
        size_t s0 = c->ev.len;
        put_probs(&c->ev, c->m, t, 0, 1);
        /* the receipt joins each chunk's entries without brackets */
        if (c->n_lp++) jbuf_puts(&c->lp, ", ");
        jbuf_put(&c->lp, c->ev.p + s0 + 1, c->ev.len - s0 - 2);
        jbuf_putc(&c->ev, '}');
    }
    jbuf_puts(&c->ev, "}]");
    chunk_tail(c);
    if (stop_now) {
        jbuf_puts(&c->ev, ",\"timings\":");
        put_timings(&c->ev, g);
    }
    jbuf_putc(&c->ev, '}');
    if (send_event(c) != 0) rc = -1;
done:
    jbuf_free(&delta);
    return rc;
}

/* The model a request names, resident and locked (eng.run held on
 * success). NULL after answering the error. */
static nat_model *lock_model(const json_value *body, serve_resp *resp)
{
    const char *asked = NULL;
    size_t al;
    char err[1024];
    int status = 500;
    if (body) json_as_str(json_get(body, "model"), &asked, &al);
    met_busy(0, 1);
    pthread_mutex_lock(&eng.run);
    met_busy(0, -1);
    long idx = reg_find(asked);
    if (idx < 0) {
        jbuf names;
        jbuf_init(&names);
        for (size_t i = 0; i < eng.n_reg; i++) jbuf_printf(&names, "%s%s", i ? ", " : "", eng.reg[i].name);
        snprintf(err, sizeof err, "model '%s' not found: bankml serves pinned models only (%s)", asked,
                 names.p ? names.p : "");
        jbuf_free(&names);
        pthread_mutex_unlock(&eng.run);
        reply_err(resp, 404, err);
        return NULL;
    }
    nat_model *m = acquire((size_t)idx, &status, err, sizeof err);
    if (!m) {
        pthread_mutex_unlock(&eng.run);
        reply_err(resp, status, err);
        return NULL;
    }
    return m;
}

static void unlock_model(void)
{
    touch();
    pthread_mutex_unlock(&eng.run);
}

static void exceed_ctx(serve_resp *resp, size_t n, size_t n_ctx)
{
    char msg[256], extra[128];
    snprintf(msg, sizeof msg, "request (%zu tokens) exceeds the available context size (%zu tokens), try increasing it",
             n, n_ctx);
    snprintf(extra, sizeof extra, "\"n_prompt_tokens\":%zu,\"n_ctx\":%zu", n, n_ctx);
    serve_reply_error(resp, 400, "exceed_context_size_error", msg, extra);
}

/* /v1/chat/completions (chat = 1) and /completion (chat = 0). */
static void handle_completion(serve_req *req, serve_resp *resp, int chat)
{
    json_value *body = parse_body(req, resp);
    char err[1024];
    gen_req g;
    sctx c;
    req_opts o;
    jbuf prompt, out;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    nat_model *m;
    int32_t lp_n = 0;
    int lp_set = 0;

    if (!body) return;
    memset(&g, 0, sizeof g);
    memset(&c, 0, sizeof c);
    jbuf_init(&prompt);
    jbuf_init(&out);
    jbuf_init(&c.raw);
    jbuf_init(&c.sent);
    jbuf_init(&c.lp);
    jbuf_init(&c.ev);
    if (body->type != JSON_OBJECT) {
        reply_err(resp, 400, chat ? "'messages' is required" : "[json.exception.out_of_range.403] key 'prompt' not found");
        json_free(body);
        return;
    }
    const json_value *msgs = json_get(body, "messages"), *pr = json_get(body, "prompt");
    if (chat && !msgs) {
        reply_err(resp, 400, "'messages' is required");
        goto end_nolock;
    }
    if (chat && msgs->type != JSON_ARRAY) {
        reply_err(resp, 400, "Expected 'messages' to be an array");
        goto end_nolock;
    }
    if (!chat && !pr) {
        reply_err(resp, 400, "[json.exception.out_of_range.403] key 'prompt' not found");
        goto end_nolock;
    }
    if (chat) {
        int st;
        if (check_oai_messages(msgs, &st, err, sizeof err) != 0) {
            reply_err(resp, st, err);
            goto end_nolock;
        }
    }
    if (chat && sampler_oai_logprobs(body, &lp_n, &lp_set, err, sizeof err) != 0) {
        reply_err(resp, 400, err);
        goto end_nolock;
    }
    if (!(m = lock_model(body, resp))) goto end_nolock;
    if (read_opts(m, body, &o, &g, err, sizeof err) != 0) {
        reply_err(resp, 400, err);
        goto end;
    }
    if (lp_set) g.sp.n_probs = lp_n;
    if (chat) {
        if (render_messages(m, msgs, &prompt, err, sizeof err) != 0) {
            reply_err(resp, 400, err);
            goto end;
        }
        if (tokenize_prompt(m, prompt.p ? prompt.p : "", prompt.len, &ids, &n_ids, err, sizeof err) != 0) {
            reply_err(resp, 400, err);
            goto end;
        }
    } else if (pr->type == JSON_STRING) {
        if (tokenize_prompt(m, pr->str, pr->len, &ids, &n_ids, err, sizeof err) != 0) {
            reply_err(resp, 400, err);
            goto end;
        }
    } else {
        /* a list of ids, or of strings and ids mixed */
        int ok = pr->type == JSON_ARRAY;
        for (size_t i = 0; ok && i < pr->n; i++) {
            const json_value *it = pr->items[i];
            int64_t id;
            if (it->type == JSON_STRING) {
                int32_t *part = NULL;
                size_t np = 0;
                if (tok_tokenize(m->vocab, it->str, it->len, i == 0, 1, &part, &np, err, sizeof err) != 0) {
                    ok = 0;
                    break;
                }
                int32_t *nn = realloc(ids, (n_ids + np + 1) * sizeof *nn);
                if (nn) {
                    ids = nn;
                    if (np) memcpy(ids + n_ids, part, np * sizeof *ids);
                    n_ids += np;
                }
                free(part);
                ok = nn != NULL;
            } else if (json_as_i64(it, &id)) {
                if (id < 0 || id >= tok_n_tokens(m->vocab)) {
                    reply_err(resp, 400, "Prompt contains invalid tokens");
                    goto end;
                }
                int32_t *nn = realloc(ids, (n_ids + 1) * sizeof *nn);
                if (!nn) {
                    ok = 0;
                    break;
                }
                ids = nn;
                ids[n_ids++] = (int32_t)id;
            } else {
                ok = 0;
            }
        }
        if (!ok) {
            reply_err(resp, 400, "\"prompt\" elements must be a string, a list of tokens, a JSON object containing a "
                                 "prompt string, or a list of mixed strings & tokens.");
            goto end;
        }
    }
    pc_select(m, ids, n_ids);   /* llama-server: at slot selection, before the context check */
    g.pc_done = 1;
    if (n_ids >= fw_n_ctx(m->fw)) {
        exceed_ctx(resp, n_ids, fw_n_ctx(m->fw));
        goto end;
    }
    c.resp = resp;
    c.req = req;
    c.m = m;
    c.chat = chat;
    c.stream = o.stream;
    c.created = (long long)time(NULL);
    memcpy(c.id, "chatcmpl-", 9);
    random_id(c.id + 9, 33);
    c.model_name = eng.reg[m->idx].path;
    g.prompt = ids;
    g.n_prompt = n_ids;
    g.on_step = on_step_http;
    g.ud = &c;
    g.http = req;
    if (run_completion(m, &g, err, sizeof err) != 0) {
        if (c.began) {
            jbuf_reset(&c.ev);
            jbuf_puts(&c.ev, "{\"error\":");
            json_put_cstr(&c.ev, err);
            jbuf_putc(&c.ev, '}');
            send_event(&c);
        } else {
            reply_err(resp, 500, err);
        }
        goto end;
    }
    if (g.gone) goto end;
    if (!chat) {
        /* /completion's final result */
        jbuf_reset(&out);
        jbuf_puts(&out, "{\"index\":0,\"content\":");
        if (o.stream) jbuf_puts(&out, "\"\"");
        else json_put_str(&out, g.st.text.p ? g.st.text.p : "", g.st.text.len);
        jbuf_puts(&out, ",\"tokens\":[],\"id_slot\":0,\"stop\":true,\"model\":");
        json_put_cstr(&out, c.model_name);
        jbuf_printf(&out, ",\"tokens_predicted\":%zu,\"tokens_evaluated\":%zu,\"generation_settings\":", g.n_decoded,
                    g.n_prompt);
        put_gen_settings(&out, &g, o.stream);
        jbuf_puts(&out, ",\"prompt\":");
        {
            jbuf d;
            jbuf_init(&d);
            tok_detokenize(m->vocab, ids, n_ids, 0, 1, &d, err, sizeof err);
            json_put_str(&out, d.p ? d.p : "", d.len);
            jbuf_free(&d);
        }
        static const char *const st_names[] = {"none", "eos", "word", "limit"};
        jbuf_printf(&out, ",\"has_new_line\":%s,\"truncated\":%s,\"stop_type\":\"%s\",\"stopping_word\":",
                    c.has_new_line ? "true" : "false", g.truncated ? "true" : "false", st_names[g.stop]);
        if (g.stop == STOP_WORD) json_put_str(&out, g.stops[g.st.stop_word], g.stop_lens[g.st.stop_word]);
        else jbuf_puts(&out, "\"\"");
        jbuf_printf(&out, ",\"tokens_cached\":%zu,\"timings\":", m->n_slot);
        put_timings(&out, &g);
        if (!o.stream && g.sp.n_probs > 0 && g.n_probs_out) {
            size_t keep = g.n_probs_out;
            if (g.stop == STOP_WORD) {
                int32_t *sw = NULL;
                size_t nsw = 0;
                tok_tokenize(m->vocab, g.stops[g.st.stop_word], g.stop_lens[g.st.stop_word], 0, 0, &sw, &nsw, err,
                             sizeof err);
                keep -= nsw < keep ? nsw : keep;
                free(sw);
            }
            jbuf_puts(&out, ",\"completion_probabilities\":");
            put_probs(&out, m, g.probs, 0, keep);
        }
        jbuf_putc(&out, '}');
        if (o.stream) {
            jbuf_reset(&c.ev);
            jbuf_put(&c.ev, out.p, out.len);
            send_event(&c);
        } else {
            serve_reply_json(resp, 200, &out);
        }
        goto end;
    }
    if (!o.stream) {
        const char *content;
        size_t cl;
        parsed_content(m, g.st.text.p ? g.st.text.p : "", g.st.text.len, &content, &cl);
        if (!cl) {   /* an empty parse: llama-server answers the raw text */
            content = g.st.text.p ? g.st.text.p : "";
            cl = g.st.text.len;
        }
        jbuf_printf(&out, "{\"choices\":[{\"finish_reason\":\"%s\",\"index\":0,\"message\":{\"role\":\"assistant\","
                          "\"content\":", finish_of(&g));
        json_put_str(&out, content, cl);
        jbuf_putc(&out, '}');
        size_t lp0 = 0, lp1 = 0;
        if (g.sp.n_probs > 0 && g.n_probs_out) {
            size_t keep = g.n_probs_out;
            if (g.stop == STOP_WORD) {
                int32_t *sw = NULL;
                size_t nsw = 0;
                tok_tokenize(m->vocab, g.stops[g.st.stop_word], g.stop_lens[g.st.stop_word], 0, 0, &sw, &nsw, err,
                             sizeof err);
                keep -= nsw < keep ? nsw : keep;
                free(sw);
            }
            jbuf_puts(&out, ",\"logprobs\":{\"content\":");
            lp0 = out.len;
            put_probs(&out, m, g.probs, 0, keep);
            lp1 = out.len;
            jbuf_putc(&out, '}');
        }
        jbuf_printf(&out, "}],\"created\":%lld,\"model\":", c.created);
        json_put_cstr(&out, c.model_name);
        jbuf_puts(&out, ",\"system_fingerprint\":\"" FINGERPRINT "\",\"object\":\"chat.completion\",\"usage\":");
        put_usage(&out, &g);
        jbuf_printf(&out, ",\"id\":\"%s\",\"timings\":", c.id);
        put_timings(&out, &g);
        jbuf_puts(&out, ",\"bankml_receipt\":");
        {
            jbuf lpc;
            jbuf_init(&lpc);
            if (lp1 > lp0) jbuf_put(&lpc, out.p + lp0, lp1 - lp0);
            put_receipt(&out, m, &g, req, content, cl, lpc.p ? lpc.p : "", lpc.len, lp1 > lp0);
            jbuf_free(&lpc);
        }
        jbuf_putc(&out, '}');
        serve_reply_json(resp, 200, &out);
        goto end;
    }
    /* the stream's end: the final chunk, usage when asked, the receipt, [DONE] */
    if (g.n_decoded == 0) {   /* nothing was generated: the role delta was never sent */
        chunk_head(&c);
        jbuf_puts(&c.ev, "{\"role\":\"assistant\",\"content\":null}}]");
        chunk_tail(&c);
        jbuf_putc(&c.ev, '}');
        send_event(&c);
    }
    jbuf_reset(&c.ev);
    jbuf_printf(&c.ev, "{\"choices\":[{\"finish_reason\":\"%s\",\"index\":0,\"delta\":{}}]", finish_of(&g));
    chunk_tail(&c);
    if (o.include_usage) {
        jbuf_putc(&c.ev, '}');
        if (send_event(&c) != 0) goto end;
        jbuf_reset(&c.ev);
        jbuf_puts(&c.ev, "{\"choices\":[]");
        chunk_tail(&c);
        jbuf_puts(&c.ev, ",\"usage\":");
        put_usage(&c.ev, &g);
    }
    jbuf_puts(&c.ev, ",\"timings\":");
    put_timings(&c.ev, &g);
    jbuf_putc(&c.ev, '}');
    if (send_event(&c) != 0) goto end;
    jbuf_reset(&c.ev);
    jbuf_puts(&c.ev, "{\"bankml_receipt\":");
    {
        jbuf lpa;
        jbuf_init(&lpa);
        jbuf_putc(&lpa, '[');
        jbuf_put(&lpa, c.lp.p ? c.lp.p : "", c.lp.len);
        jbuf_putc(&lpa, ']');
        put_receipt(&c.ev, m, &g, req, c.sent.p ? c.sent.p : "", c.sent.len, lpa.p, lpa.len, g.sp.n_probs > 0);
        jbuf_free(&lpa);
    }
    jbuf_putc(&c.ev, '}');
    if (send_event(&c) != 0) goto end;
    jbuf_reset(&c.ev);
    jbuf_puts(&c.ev, "[DONE]");
    send_event(&c);
end:
    unlock_model();
end_nolock:
    gen_free(&g);
    free(ids);
    jbuf_free(&prompt);
    jbuf_free(&out);
    jbuf_free(&c.raw);
    jbuf_free(&c.sent);
    jbuf_free(&c.lp);
    jbuf_free(&c.ev);
    json_free(body);
}

static void h_chat(serve_req *req, serve_resp *resp, void *ud) { (void)ud; handle_completion(req, resp, 1); }
static void h_completion(serve_req *req, serve_resp *resp, void *ud) { (void)ud; handle_completion(req, resp, 0); }

/* ------------------------------------------------------------------ HTTP: the other routes */

/* A token id as nlohmann's get<llama_token>() reads a number or a boolean
 * (fractions truncated, wider integers cut to 32 bits); v is one of those. */
static int32_t nl_token_id(const json_value *v)
{
    int64_t x;
    if (v->type != JSON_NUMBER) return v->type == JSON_TRUE;
    if (json_as_i64(v, &x)) return (int32_t)(uint32_t)(uint64_t)x;
    double d = strtod(v->str, NULL);
    return d > -2147483649.0 && d < 2147483648.0 ? (int32_t)d : INT32_MIN;
}

static void h_tokenize(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    char err[512];
    int add_special = 0, parse_special = 1, pieces = 0;
    if (!body) return;
    const json_value *ct = json_get(body, "content");
    /* content: absent (no tokens), a string, or strings and ids mixed
     * (tokenize_mixed); anything else is nlohmann's get<std::string> error */
    for (size_t i = 0; ct && ct->type == JSON_ARRAY && i < ct->n; i++)
        if (ct->items[i]->type != JSON_STRING && ct->items[i]->type != JSON_NUMBER &&
            ct->items[i]->type != JSON_TRUE && ct->items[i]->type != JSON_FALSE) {
            bk_err(err, sizeof err, "[json.exception.type_error.302] type must be number, but is %s",
                    jtype(ct->items[i]));
            reply_err(resp, 400, err);
            json_free(body);
            return;
        }
    if (ct && ct->type != JSON_STRING && ct->type != JSON_ARRAY) {
        bk_err(err, sizeof err, "[json.exception.type_error.302] type must be string, but is %s", jtype(ct));
        reply_err(resp, 400, err);
        json_free(body);
        return;
    }
    field_bool(body, "add_special", &add_special, err, sizeof err);
    field_bool(body, "parse_special", &parse_special, err, sizeof err);
    field_bool(body, "with_pieces", &pieces, err, sizeof err);
    nat_model *m = lock_model(NULL, resp);
    if (!m) {
        json_free(body);
        return;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    jbuf out, pc;
    jbuf_init(&out);
    jbuf_init(&pc);
    int bad = 0;
    if (ct && ct->type == JSON_STRING) {
        bad = tok_tokenize(m->vocab, ct->str, ct->len, add_special, parse_special, &ids, &n, err, sizeof err);
    } else if (ct) {
        /* BOS only before a first element that is a string */
        for (size_t i = 0; !bad && i < ct->n; i++) {
            const json_value *it = ct->items[i];
            int32_t *part = NULL, one;
            size_t np = 0;
            if (it->type == JSON_STRING) {
                bad = tok_tokenize(m->vocab, it->str, it->len, i == 0 && add_special, parse_special, &part, &np,
                                   err, sizeof err);
            } else {
                one = nl_token_id(it);
                part = &one;
                np = 1;
            }
            int32_t *nn = bad ? NULL : realloc(ids, (n + np + 1) * sizeof *nn);
            if (!bad && !nn) {
                bk_err(err, sizeof err, "out of memory");
                bad = -1;
            }
            if (nn) {
                ids = nn;
                if (np) memcpy(ids + n, part, np * sizeof *ids);
                n += np;
            }
            if (part != &one) free(part);
        }
    }
    if (bad) {
        reply_err(resp, 400, err);
    } else {
        jbuf_puts(&out, "{\"tokens\":[");
        for (size_t i = 0; i < n; i++) {
            if (i) jbuf_putc(&out, ',');
            if (!pieces) {
                jbuf_printf(&out, "%d", (int)ids[i]);
                continue;
            }
            jbuf_reset(&pc);
            tok_piece(m->vocab, ids[i], 1, &pc);
            jbuf_printf(&out, "{\"id\":%d,\"piece\":", (int)ids[i]);
            if (native_utf8_complete(pc.p ? pc.p : "", pc.len) == pc.len) json_put_str(&out, pc.p ? pc.p : "", pc.len);
            else put_bytes(&out, pc.p, pc.len);
            jbuf_putc(&out, '}');
        }
        jbuf_puts(&out, "]}");
        serve_reply_json(resp, 200, &out);
    }
    unlock_model();
    free(ids);
    jbuf_free(&out);
    jbuf_free(&pc);
    json_free(body);
}

static void h_detokenize(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    if (!body) return;
    nat_model *m = lock_model(NULL, resp);
    if (!m) {
        json_free(body);
        return;
    }
    jbuf text, out;
    jbuf_init(&text);
    jbuf_init(&out);
    const json_value *t = json_get(body, "tokens");
    /* tokens: get<llama_tokens>(), nlohmann's errors for another shape */
    const json_value *badv = t && t->type != JSON_ARRAY ? t : NULL;
    for (size_t i = 0; t && !badv && t->type == JSON_ARRAY && i < t->n; i++)
        if (t->items[i]->type != JSON_NUMBER && t->items[i]->type != JSON_TRUE && t->items[i]->type != JSON_FALSE)
            badv = t->items[i];
    if (badv) {
        char err[160];
        bk_err(err, sizeof err, "[json.exception.type_error.302] type must be %s, but is %s",
                badv == t ? "array" : "number", jtype(badv));
        reply_err(resp, 400, err);
        t = NULL;
    }
    for (size_t i = 0; t && t->type == JSON_ARRAY && i < t->n; i++) {
        int32_t id = nl_token_id(t->items[i]);
        if (id >= 0 && id < tok_n_tokens(m->vocab)) tok_piece(m->vocab, id, 1, &text);
    }
    if (!badv) {
        jbuf_puts(&out, "{\"content\":");
        json_put_str(&out, text.p ? text.p : "", text.len);
        jbuf_putc(&out, '}');
        serve_reply_json(resp, 200, &out);
    }
    unlock_model();
    jbuf_free(&text);
    jbuf_free(&out);
    json_free(body);
}

static void h_apply_template(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    char err[1024];
    if (!body) return;
    const json_value *msgs = json_get(body, "messages");
    if (!msgs) {
        reply_err(resp, 400, "'messages' is required");
        json_free(body);
        return;
    }
    if (msgs->type != JSON_ARRAY) {
        reply_err(resp, 400, "Expected 'messages' to be an array");
        json_free(body);
        return;
    }
    int st;
    if (check_oai_messages(msgs, &st, err, sizeof err) != 0) {
        reply_err(resp, st, err);
        json_free(body);
        return;
    }
    nat_model *m = lock_model(body, resp);
    if (!m) {
        json_free(body);
        return;
    }
    jbuf p, out;
    jbuf_init(&p);
    jbuf_init(&out);
    if (render_messages(m, msgs, &p, err, sizeof err) != 0) {
        reply_err(resp, 400, err);
    } else {
        jbuf_puts(&out, "{\"prompt\":");
        json_put_str(&out, p.p ? p.p : "", p.len);
        jbuf_putc(&out, '}');
        serve_reply_json(resp, 200, &out);
    }
    unlock_model();
    jbuf_free(&p);
    jbuf_free(&out);
    json_free(body);
}

static void h_health(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_reply(resp, 200, SERVE_JSON, "{\"status\":\"ok\"}", 15);
}

static void h_props(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    nat_model *m = lock_model(NULL, resp);
    if (!m) return;
    gen_req g;
    jbuf out;
    memset(&g, 0, sizeof g);
    jbuf_init(&out);
    if (sampler_params_copy(&g.sp, &m->defaults) != 0) {
        reply_err(resp, 500, "out of memory");
    } else {
        g.n_predict = -1;
        const char *path = eng.reg[m->idx].path;
        jbuf_puts(&out, "{\"default_generation_settings\":{\"params\":");
        put_gen_settings(&out, &g, 0);
        jbuf_printf(&out, ",\"n_ctx\":%zu},\"total_slots\":1,\"model_alias\":", fw_n_ctx(m->fw));
        json_put_cstr(&out, path);
        jbuf_puts(&out, ",\"model_path\":");
        json_put_cstr(&out, path);
        jbuf_puts(&out, ",\"modalities\":{\"vision\":false,\"video\":false,\"audio\":false},\"endpoint_slots\":false,"
                        "\"endpoint_props\":false,\"endpoint_metrics\":false,\"chat_template\":");
        json_put_str(&out, m->tmpl, m->tmpl_len);
        jbuf_puts(&out, ",\"bos_token\":");
        json_put_cstr(&out, m->bos_piece);
        jbuf_puts(&out, ",\"eos_token\":");
        json_put_cstr(&out, m->eos_piece);
        jbuf_printf(&out, ",\"n_ctx\":%zu,\"build_info\":\"bankML " BANKML_VERSION " native\"}", fw_n_ctx(m->fw));
        serve_reply_json(resp, 200, &out);
    }
    unlock_model();
    sampler_params_free(&g.sp);
    jbuf_free(&out);
}

static void h_models(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    jbuf out;
    jbuf_init(&out);
    jbuf_puts(&out, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < eng.n_reg; i++) {
        jbuf_puts(&out, i ? ",{\"id\":" : "{\"id\":");
        json_put_cstr(&out, eng.reg[i].file);
        jbuf_puts(&out, ",\"object\":\"model\",\"owned_by\":\"bankML\"}");
    }
    jbuf_puts(&out, "]}");
    serve_reply_json(resp, 200, &out);
    jbuf_free(&out);
}

static const char *g_upstream = "";

static void h_bankml(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    jbuf out;
    jbuf_init(&out);
    pthread_mutex_lock(&eng.run);
    jbuf_puts(&out, "{\"verified\":");
    jbuf_puts(&out, eng.last_verified_json ? eng.last_verified_json : "null");
    jbuf_puts(&out, ",\"model\":");
    if (eng.cur) json_put_cstr(&out, eng.reg[eng.cur->idx].path);
    else if (eng.last_verified_json) json_put_cstr(&out, eng.reg[eng.def].path);
    else jbuf_puts(&out, "null");
    jbuf_puts(&out, ",\"upstream\":");
    json_put_cstr(&out, g_upstream);
    jbuf_puts(&out, ",\"engine\":\"" ENGINE_STR "\",\"hashed_at\":");
    if (eng.hashed_at) jbuf_printf(&out, "%lld", (long long)eng.hashed_at);
    else jbuf_puts(&out, "null");
    jbuf_puts(&out, ",\"resident\":");
    if (eng.cur) json_put_cstr(&out, eng.reg[eng.cur->idx].name);
    else jbuf_puts(&out, "null");
    jbuf_puts(&out, ",\"models\":[");
    for (size_t i = 0; i < eng.n_reg; i++) {
        if (i) jbuf_putc(&out, ',');
        json_put_cstr(&out, eng.reg[i].name);
    }
    jbuf_puts(&out, "]}");
    pthread_mutex_unlock(&eng.run);
    serve_reply_json(resp, 200, &out);
    jbuf_free(&out);
}

/* GET /metrics: llama-server's --metrics text, the same names, HELP and
 * TYPE lines in its order; values printed as its ostream prints doubles
 * (%g). The gauges cover the time since the previous scrape, as there. */
static void h_metrics(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    static const struct { const char *name, *help; } cn[] = {
        {"prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens"},
        {"prompt_tokens_cached_total", "Number of prompt tokens reused from the cache"},
        {"prompt_seconds_total", "Total time spent processing prompts"},
        {"tokens_predicted_total", "Number of generation tokens processed"},
        {"tokens_predicted_seconds_total", "Total time spent generating tokens"},
        {"n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding"},
        {"n_tokens_max", "Largest observed sequence length (prompt + generation)"},
        {"spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated"},
        {"spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model"},
        {"spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps"},
        {"prompt_tokens_seconds", "Average prompt throughput in tokens/s"},
        {"predicted_tokens_seconds", "Average generation throughput in tokens/s"},
        {"requests_processing", "Number of requests processing"},
        {"requests_deferred", "Number of requests deferred"},
        {"n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call"},
    };
    double v[15];
    char start[32];
    pthread_mutex_lock(&met.mu);
    v[0] = (double)met.prompt.count;
    v[1] = (double)met.cached;
    v[2] = (double)met.prompt.us / 1e6;
    v[3] = (double)met.predict.count;
    v[4] = (double)met.predict.us / 1e6;
    v[5] = (double)met.n_decode;
    v[6] = (double)met.n_tokens_max;
    v[7] = v[8] = v[9] = 0;
    v[10] = bucket_rate(&met.prompt_win);
    v[11] = bucket_rate(&met.predict_win);
    v[12] = met.processing;
    v[13] = met.deferred;
    v[14] = (double)met.n_busy / (met.n_decode > 1 ? (double)met.n_decode : 1.0);
    memset(&met.prompt_win, 0, sizeof met.prompt_win);
    memset(&met.predict_win, 0, sizeof met.predict_win);
    snprintf(start, sizeof start, "%lld", (long long)met.t_start);
    pthread_mutex_unlock(&met.mu);
    jbuf out;
    jbuf_init(&out);
    for (size_t i = 0; i < 15; i++)
        jbuf_printf(&out, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %g\n", cn[i].name, cn[i].help,
                    cn[i].name, i < 10 ? "counter" : "gauge", cn[i].name, v[i]);
    serve_resp_header(resp, "Process-Start-Time-Unix", start);
    serve_reply(resp, 200, "text/plain; version=0.0.4", out.p ? out.p : "", out.len);
    jbuf_free(&out);
}

static void put_ms(jbuf *b, const char *key, double ms)
{
    jbuf_printf(b, ",\"%s\":", key);
    if (ms < 0) jbuf_puts(b, "null");
    else native_put_double(b, ms);
}

/* GET /bankml/metrics: the last NAT_KEEP completions, oldest first, with
 * totals since start. Energy is not measured here (null). */
static void h_bankml_metrics(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    jbuf out;
    jbuf_init(&out);
    pthread_mutex_lock(&met.mu);
    jbuf_printf(&out, "{\"kept\":%zu,\"keep\":%d,\"prompt_tokens\":%llu,\"completion_tokens\":%llu,"
                      "\"energy_j\":null,\"joules_per_token\":null,\"records\":[",
                met.n_rec, NAT_KEEP, (unsigned long long)met.tot_prompt, (unsigned long long)met.tot_completion);
    for (size_t k = 0; k < met.n_rec; k++) {
        const nat_record *r = &met.ring[(met.head + NAT_KEEP - met.n_rec + k) % NAT_KEEP];
        if (k) jbuf_putc(&out, ',');
        jbuf_printf(&out, "{\"at\":%lld,\"model\":", (long long)r->at);
        json_put_cstr(&out, r->model);
        jbuf_printf(&out, ",\"prompt_tokens\":%zu,\"cached_tokens\":%zu,\"completion_tokens\":%zu", r->prompt,
                    r->cached, r->completion);
        put_ms(&out, "prompt_ms", r->prompt_ms);
        put_ms(&out, "ttft_ms", r->ttft_ms);
        put_ms(&out, "eval_ms", r->eval_ms);
        jbuf_printf(&out, ",\"finish\":\"%s\",\"grammar_ms\":null,\"resampled\":null,\"energy_j\":null", r->finish);
        put_ms(&out, "prompt_tps", r->prompt_ms > 0 ? (double)(r->prompt - r->cached) / r->prompt_ms * 1e3 : -1);
        put_ms(&out, "eval_tps", r->eval_ms > 0 && r->completion > 1 ? (double)(r->completion - 1) / r->eval_ms * 1e3
                                                                     : -1);
        jbuf_puts(&out, ",\"joules_per_token\":null}");
    }
    jbuf_puts(&out, "]}");
    pthread_mutex_unlock(&met.mu);
    serve_reply_json(resp, 200, &out);
    jbuf_free(&out);
}

/* ---- /bankml/usage: the machine and this process, from /proc ---- */

static long long meminfo_kb(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* utime + stime in ticks and the resident pages of this process. */
static int self_stat(unsigned long long *ticks, long long *rss_pages)
{
    char buf[2048];
    size_t len;
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -1;
    len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    const char *p = strrchr(buf, ')');   /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    long long rss = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %*u %*u %lld",
                     &ut, &st, &rss) != 3)
        return -1;
    *ticks = ut + st;
    *rss_pages = rss;
    return 0;
}

static long long rapl_uj(void)
{
    FILE *f = fopen("/sys/class/powercap/intel-rapl:0/energy_uj", "r");
    long long v = -1;
    if (!f) return -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

static struct {
    pthread_mutex_t mu;
    int64_t at_us;             /* when the cached answer was taken */
    char *json;
} usage = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* §2.3: sampled over 250 ms, the answer cached for up to 1 s so that a
 * polling UI does not keep a core busy measuring. */
static void h_bankml_usage(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    pthread_mutex_lock(&usage.mu);
    if (!usage.json || bk_mono_us() - usage.at_us > 1000000) {
        unsigned long long t0 = 0, t1 = 0;
        long long rss = 0, e0 = rapl_uj(), e1;
        int64_t w0 = bk_mono_us();
        self_stat(&t0, &rss);
        usleep(250000);
        int64_t w1 = bk_mono_us();
        self_stat(&t1, &rss);
        e1 = rapl_uj();
        long hz = sysconf(_SC_CLK_TCK);
        double secs = (double)(w1 - w0) / 1e6;
        double cpu = hz > 0 && secs > 0 ? (double)(t1 - t0) / (double)hz / secs * 100.0 : 0.0;
        long long rss_b = rss * (long long)sysconf(_SC_PAGESIZE);
        char mi[8192] = "";
        FILE *f = fopen("/proc/meminfo", "r");
        if (f) {
            size_t n = fread(mi, 1, sizeof mi - 1, f);
            mi[n] = 0;
            fclose(f);
        }
        jbuf out;
        jbuf_init(&out);
        jbuf_printf(&out, "{\"source\":\"proc\",\"cores\":%ld,\"mem_total_bytes\":%lld,\"mem_available_bytes\":%lld,"
                          "\"swap_total_bytes\":%lld,\"swap_free_bytes\":%lld,\"rss_bytes\":%lld,\"cpu_percent\":",
                    sysconf(_SC_NPROCESSORS_ONLN), meminfo_kb(mi, "MemTotal:") * 1024,
                    meminfo_kb(mi, "MemAvailable:") * 1024, meminfo_kb(mi, "SwapTotal:") * 1024,
                    meminfo_kb(mi, "SwapFree:") * 1024, rss_b);
        native_put_double(&out, (double)(int64_t)(cpu * 10 + 0.5) / 10);
        jbuf_printf(&out, ",\"interval_ms\":%lld,\"processes\":[{\"name\":\"bankml serve\",\"pid\":%ld,"
                          "\"rss_bytes\":%lld,\"cpu_percent\":", (long long)((w1 - w0) / 1000), (long)getpid(),
                    rss_b);
        native_put_double(&out, (double)(int64_t)(cpu * 10 + 0.5) / 10);
        jbuf_puts(&out, "}],\"package_watts\":");
        if (e0 >= 0 && e1 >= 0 && e1 >= e0 && secs > 0) native_put_double(&out, (double)(e1 - e0) / 1e6 / secs);
        else jbuf_puts(&out, "null");   /* unreadable, or wrapped in this short interval */
        jbuf_puts(&out, ",\"gpus\":[],\"gpu_limiter\":null}");
        if (!out.oom) {
            free(usage.json);
            usage.json = strdup(out.p);
            usage.at_us = bk_mono_us();
        }
        jbuf_free(&out);
    }
    if (usage.json) serve_reply(resp, 200, "application/json; charset=utf-8", usage.json, strlen(usage.json));
    else reply_err(resp, 500, "out of memory");
    pthread_mutex_unlock(&usage.mu);
}

static void put_html(jbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') jbuf_puts(b, "&lt;");
        else if (*s == '>') jbuf_puts(b, "&gt;");
        else if (*s == '&') jbuf_puts(b, "&amp;");
        else if (*s == '"') jbuf_puts(b, "&quot;");
        else jbuf_putc(b, *s);
    }
}

/* GET /: a page for a browser (it asks for text/html), a line for others. */
static void h_root(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    const char *accept = serve_header_get(req, "Accept");
    if (!accept || !strstr(accept, "text/html")) {
        serve_reply_text(resp, 200, "bankml is running (Ollama's API at /api, native only)\n");
        return;
    }
    jbuf out;
    jbuf_init(&out);
    jbuf_puts(&out, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"3\">"
                    "<title>bankml serve</title></head><body style=\"font-family:monospace\">\n<h1>bankml serve "
                    BANKML_VERSION "</h1>\n<p>");
    pthread_mutex_lock(&eng.run);
    jbuf_puts(&out, "resident: ");
    put_html(&out, eng.cur ? eng.reg[eng.cur->idx].name : "none");
    jbuf_printf(&out, "; sha256 %s</p>\n<p>models:", eng.last_sha[0] ? eng.last_sha : "(none yet)");
    for (size_t i = 0; i < eng.n_reg; i++) {
        jbuf_putc(&out, ' ');
        put_html(&out, eng.reg[i].name);
        if (!eng.reg[i].present) jbuf_puts(&out, " (absent)");
    }
    pthread_mutex_unlock(&eng.run);
    pthread_mutex_lock(&met.mu);
    jbuf_printf(&out, "</p>\n<p>completions: %llu prompt tokens, %llu generated; %s</p>\n",
                (unsigned long long)met.tot_prompt, (unsigned long long)met.tot_completion,
                met.processing ? "generating now" : "idle");
    pthread_mutex_unlock(&met.mu);
    jbuf_puts(&out, "<p><a href=\"/bankml\">/bankml</a> &middot; <a href=\"/bankml/usage\">/bankml/usage</a> &middot; "
                    "<a href=\"/bankml/metrics\">/bankml/metrics</a> &middot; <a href=\"/metrics\">/metrics</a> "
                    "&middot; <a href=\"/v1/models\">/v1/models</a></p>\n</body></html>\n");
    serve_reply(resp, 200, "text/html; charset=utf-8", out.p, out.len);
    jbuf_free(&out);
}

/* Unknown routes: under /v1/ llama-server's own JSON 404 (OpenAI clients
 * parse it); elsewhere a text line that lists every route. */
static void h_not_found(serve_req *req, serve_resp *resp, void *ud)
{
    serve_server *srv = ud;
    if (!strncmp(req->path, "/v1/", 4)) {
        static const char body[] = "{\"error\":{\"message\":\"File Not Found\",\"type\":\"not_found_error\",\"code\":404}}";
        serve_reply(resp, 404, "application/json; charset=utf-8", body, sizeof body - 1);
        return;
    }
    jbuf out;
    jbuf_init(&out);
    jbuf_puts(&out, "bankml serve: ");
    serve_route_list(srv, &out);
    jbuf_putc(&out, '\n');
    serve_reply(resp, 404, "text/plain; charset=utf-8", out.p, out.len);
    jbuf_free(&out);
}

/* ------------------------------------------------------------------ bankml serve */

/* "30s", "5m", "1h", "250ms", a bare number of seconds; "-1"/"forever" = never. */
static int parse_duration_ms(const char *s, int64_t *ms)
{
    char *end;
    if (!strcmp(s, "forever") || !strcmp(s, "-1")) {
        *ms = -1;
        return 0;
    }
    double v = strtod(s, &end);
    if (end == s || v < 0 || !isfinite(v)) return -1;
    if (!*end || !strcmp(end, "s")) *ms = (int64_t)(v * 1000);
    else if (!strcmp(end, "ms")) *ms = (int64_t)v;
    else if (!strcmp(end, "m")) *ms = (int64_t)(v * 60000);
    else if (!strcmp(end, "h")) *ms = (int64_t)(v * 3600000);
    else return -1;
    return 0;
}

static int parse_count(const char *opt, const char *v, long lo, long hi, long *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || end == v || x < lo || x > hi) {
        fprintf(stderr, "bankml serve: %s wants a number from %ld to %ld, not %s\n", opt, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* The host prompt cache's limit (§1.3): --cache-ram N (MiB, llama-server's
 * flag), else BANKML_CACHE_RAM, else min(8192 MiB, a quarter of
 * MemAvailable) with a 1 MiB floor. 0 turns it off, a negative value lifts
 * the limit. */
static int cache_ram_opt(int argc, char **argv)
{
    const char *v = getenv("BANKML_CACHE_RAM");
    long long mib = 8192;
    if (arg_val(argc, argv, "--cache-ram", &v) <= 0 && arg_val(argc, argv, "-cram", &v) <= 0 && !(v && *v)) {
        FILE *f = fopen("/proc/meminfo", "r");
        char line[256];
        long long kb = -1;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
        if (f) fclose(f);
        if (kb > 0 && kb / 1024 / 4 < mib) mib = kb / 1024 / 4;
        if (mib < 1) mib = 1;
        v = NULL;
    }
    if (v) {
        char *end;
        errno = 0;
        mib = strtoll(v, &end, 10);
        if (errno || end == v || *end || mib > (long long)(SIZE_MAX >> 20)) {
            fprintf(stderr, "bankml serve: --cache-ram wants a number of MiB (0 = off, -1 = no limit), not %s\n", v);
            return -1;
        }
    }
    eng.cache_on = mib != 0;
    eng.cache_limit = mib > 0 ? (size_t)mib << 20 : 0;
    return 0;
}

int native_cmd_serve(int argc, char **argv)
{
    const char *model = first_positional(argc, argv), *v, *fork = g_fork_default, *dir = NULL;
    const char *listen = "127.0.0.1:18093", *upstream = NULL;
    char err[1024], listen_buf[300];
    long x;
    int status;
    serve_opts so;

    eng.n_ctx = 4096;
    eng.llama_threads = 2;
    eng.threads = default_threads();
    eng.keep_alive_ms = 5 * 60 * 1000;
    met.t_start = (int64_t)time(NULL);
    if (arg_val(argc, argv, "--fork", &v) > 0) fork = v;
    if (arg_val(argc, argv, "--registry", &v) > 0) dir = v;
    if (arg_val(argc, argv, "--ctx", &v) > 0 || arg_val(argc, argv, "-c", &v) > 0) {
        if (parse_count("--ctx", v, 1, 1 << 24, &x)) return BANKML_EXIT_IO;
        eng.n_ctx = (size_t)x;
    }
    if (arg_val(argc, argv, "--threads", &v) > 0) {
        if (parse_count("--threads", v, 1, PAR_MAX_THREADS, &x)) return BANKML_EXIT_IO;
        eng.threads = (int)x;
    }
    if (arg_val(argc, argv, "--llama-threads", &v) > 0 || arg_val(argc, argv, "-t", &v) > 0) {
        if (parse_count("--llama-threads", v, 1, 1024, &x)) return BANKML_EXIT_IO;
        eng.llama_threads = (int)x;
    }
    if (arg_val(argc, argv, "--keep-alive", &v) > 0 && parse_duration_ms(v, &eng.keep_alive_ms) != 0) {
        fprintf(stderr, "bankml serve: --keep-alive wants a duration (30s, 5m, 1h, -1), not %s\n", v);
        return BANKML_EXIT_IO;
    }
    if (cache_ram_opt(argc, argv) != 0) return BANKML_EXIT_IO;
    if (arg_val(argc, argv, "--listen", &v) > 0) listen = v;
    {
        const char *h = NULL, *p = NULL;
        if (arg_val(argc, argv, "--port", &p) > 0) {
            if (arg_val(argc, argv, "--host", &h) <= 0) h = "127.0.0.1";
            snprintf(listen_buf, sizeof listen_buf, "%s:%s", h, p);
            listen = listen_buf;
        }
    }
    if (arg_val(argc, argv, "--upstream", &v) > 0) upstream = v;
    g_upstream = upstream ? upstream : "";

    /* the registry: the startup model first, then the fork's or the directory's pins */
    char fdir[4096];
    snprintf(fdir, sizeof fdir, "%s", fork);
    char *slash = strrchr(fdir, '/');
    if (slash) *slash = 0;
    else snprintf(fdir, sizeof fdir, ".");
    char mdir[4096 + 8];
    snprintf(mdir, sizeof mdir, "%s/models", fdir);
    if (model) {
        struct stat st;
        if (stat(model, &st) != 0) {
            fprintf(stderr, "bankml serve: cannot read %s: %s\n", model, strerror(errno));
            return BANKML_EXIT_IO;
        }
        reg_add(model, model, fork, 1);
    }
    if (dir) {
        char near[4096];
        snprintf(near, sizeof near, "%s", model ? model : dir);
        char *s2 = strrchr(near, '/');
        if (model && s2) *s2 = 0;
        else if (model) snprintf(near, sizeof near, ".");
        reg_add_dir(dir, near);
    } else if (!model) {
        reg_add_fork(fork, fdir, mdir);
    }
    if (eng.n_reg == 0) {
        fprintf(stderr, "bankml serve: no model: name one, or a --registry whose FORK.json files pin some\n");
        return BANKML_EXIT_IO;
    }
    eng.def = 0;
    if (!model) {   /* the first pinned file that is here */
        for (size_t i = 0; i < eng.n_reg; i++)
            if (eng.reg[i].present) {
                eng.def = i;
                break;
            }
    }
    eng.pool = par_create(eng.threads, err, sizeof err);
    if (!eng.pool) {
        fprintf(stderr, "bankml serve: %s\n", err);
        return BANKML_EXIT_IO;
    }
    eng.cur = acquire(eng.def, &status, err, sizeof err);
    if (!eng.cur) {
        fprintf(stderr, "bankml serve: %s\n", err);
        par_destroy(eng.pool);
        return status == 404 || status == 500 ? BANKML_EXIT_IO : BANKML_REFUSE;
    }
    touch();
    serve_opts_default(&so);
    /* llama-server reads any POST body as JSON whatever its Content-Type, and
     * `curl -d` sends form encoding: refusing it would break its clients. */
    so.json_posts_only = 0;
    if (arg_val(argc, argv, "--api-key", &v) > 0) so.api_keys = v;
    if (arg_val(argc, argv, "--allow-origin", &v) > 0) so.allow_origins = v;
    serve_server *srv = serve_new(&so, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "bankml serve: %s\n", err);
        return BANKML_EXIT_IO;
    }
    serve_route(srv, "GET", "/health", h_health, NULL, SERVE_PUBLIC);
    serve_route(srv, "GET", "/v1/health", h_health, NULL, SERVE_PUBLIC);
    serve_route(srv, "GET", "/bankml", h_bankml, NULL, 0);
    serve_route(srv, "GET", "/props", h_props, NULL, 0);
    serve_route(srv, "GET", "/v1/models", h_models, NULL, 0);
    serve_route(srv, "GET", "/models", h_models, NULL, 0);
    serve_route(srv, "POST", "/v1/chat/completions", h_chat, NULL, 0);
    serve_route(srv, "POST", "/chat/completions", h_chat, NULL, 0);
    serve_route(srv, "POST", "/completion", h_completion, NULL, 0);
    serve_route(srv, "POST", "/completions", h_completion, NULL, 0);
    serve_route(srv, "POST", "/tokenize", h_tokenize, NULL, 0);
    serve_route(srv, "POST", "/detokenize", h_detokenize, NULL, 0);
    serve_route(srv, "POST", "/apply-template", h_apply_template, NULL, 0);
    serve_route(srv, "GET", "/metrics", h_metrics, NULL, 0);
    serve_route(srv, "GET", "/bankml/usage", h_bankml_usage, NULL, 0);
    serve_route(srv, "GET", "/bankml/metrics", h_bankml_metrics, NULL, 0);
    serve_route(srv, "GET", "/", h_root, NULL, SERVE_PUBLIC);
    serve_set_not_found(srv, h_not_found, srv);
    ollama_register(srv, dir);   /* Ollama's /api/ routes on the same engine */
    if (serve_listen(srv, listen, err, sizeof err) < 0) {
        fprintf(stderr, "bankml serve: %s\n", err);
        serve_free(srv);
        return BANKML_EXIT_IO;
    }
    if (upstream && serve_listen(srv, upstream, err, sizeof err) < 0) {
        fprintf(stderr, "bankml serve: cannot listen on the engine address %s: %s (is llama-server running there?)\n",
                upstream, err);
        serve_free(srv);
        return BANKML_EXIT_IO;
    }
    serve_install_signals(srv);
    pthread_t reaper;
    int have_reaper = pthread_create(&reaper, NULL, reaper_main, NULL) == 0;
    {
        jbuf names;
        jbuf_init(&names);
        for (size_t i = 0; i < eng.n_reg; i++) jbuf_printf(&names, "%s%s", i ? ", " : "", eng.reg[i].name);
        fprintf(stderr, "bankml serve %s --native: %s verified (sha256 %s); models %s; listening on http://%s%s%s\n",
                BANKML_VERSION, eng.reg[eng.def].path, eng.last_sha, names.p ? names.p : "", listen,
                upstream ? " and, for llama-server's clients, http://" : "", upstream ? upstream : "");
        jbuf_free(&names);
    }
    int rc = serve_run(srv);
    eng.stop_reaper = 1;
    if (have_reaper) pthread_join(reaper, NULL);
    serve_free(srv);
    pthread_mutex_lock(&eng.run);
    model_free(eng.cur);
    eng.cur = NULL;
    pthread_mutex_unlock(&eng.run);
    par_destroy(eng.pool);
    free(eng.reg);
    free(eng.last_verified_json);
    return rc == 0 ? BANKML_OK : BANKML_EXIT_IO;
}

/* ---- engine entry points for ollama.c ---- */

/* ollama.c translates Ollama's shapes onto the same engine, registry and
 * slot as the routes above; these functions are its only way in, so the
 * locking rule (eng.run for anything that touches the model) stays here. */

size_t native_n_entries(void) { return eng.n_reg; }

size_t native_default_entry(void) { return eng.def; }

size_t native_served_ctx(void) { return eng.n_ctx; }

/* --keep-alive (5 min when absent; -1 forever): Ollama's default for a request without keep_alive. */
int64_t native_keep_alive_ms(void) { return eng.keep_alive_ms; }

int native_entry_get(size_t i, native_entry *e)
{
    if (i >= eng.n_reg) return -1;
    e->name = eng.reg[i].name;
    e->file = eng.reg[i].file;
    e->path = eng.reg[i].path;
    e->fork = eng.reg[i].fork;
    e->present = eng.reg[i].present;
    return 0;
}

long native_entry_find(const char *asked) { return reg_find(asked); }

void native_engine_lock(void) { pthread_mutex_lock(&eng.run); }

void native_engine_unlock(void) { pthread_mutex_unlock(&eng.run); }

int native_engine_acquire(size_t idx, int *loaded, int *status, char *err, size_t errlen)
{
    *loaded = !(eng.cur && eng.cur->idx == idx);
    if (idx >= eng.n_reg) {
        *status = 404;
        bk_err(err, errlen, "no such model");
        return -1;
    }
    return acquire(idx, status, err, errlen) ? 0 : -1;
}

/* Ollama's keep_alive decides the expiry, not --keep-alive: 0 drops the
 * weights now (their mapping released), < 0 keeps them for good. */
void native_engine_release(int64_t keep_alive_ms)
{
    if (keep_alive_ms == 0) {
        if (eng.cur) fprintf(stderr, "bankml serve: %s: keep_alive 0; unloaded\n", eng.reg[eng.cur->idx].name);
        model_free(eng.cur);
        eng.cur = NULL;
    } else {
        eng.expires_us = keep_alive_ms < 0 ? 0 : bk_mono_us() + keep_alive_ms * 1000;
    }
    pthread_mutex_unlock(&eng.run);
}

long native_engine_resident(int64_t *expires_in_ms)
{
    if (!eng.cur) return -1;
    if (expires_in_ms) {
        if (!eng.expires_us) *expires_in_ms = -1;
        else {
            int64_t left = (eng.expires_us - bk_mono_us()) / 1000;
            *expires_in_ms = left > 0 ? left : 0;
        }
    }
    return (long)eng.cur->idx;
}

const sampler_params *native_engine_defaults(void) { return eng.cur ? &eng.cur->defaults : NULL; }

size_t native_engine_n_ctx(void) { return eng.cur ? fw_n_ctx(eng.cur->fw) : 0; }

int native_engine_render(const json_value *messages, jbuf *out, char *err, size_t errlen)
{
    if (!eng.cur) {
        bk_err(err, errlen, "no model is resident");
        return -1;
    }
    return render_messages(eng.cur, messages, out, err, errlen);
}

int native_engine_tokenize(const char *text, size_t len, int32_t **ids, size_t *n, char *err, size_t errlen)
{
    if (!eng.cur) {
        bk_err(err, errlen, "no model is resident");
        return -1;
    }
    return tokenize_prompt(eng.cur, text, len, ids, n, err, errlen);
}

void native_engine_content(const char *s, size_t n, const char **out, size_t *len)
{
    if (eng.cur) parsed_content(eng.cur, s, n, out, len);
    else *out = s, *len = n;
}

typedef struct {
    native_run *r;
    gen_req *g;
} run_bridge;

static int on_step_bridge(gen_req *g, const tok_out *t, int stop_now)
{
    (void)stop_now;
    native_run *r = ((run_bridge *)g->ud)->r;
    if (!r->on_text) return 0;
    return r->on_text(r->ud, t->text, t->text_len);
}

int native_engine_run(native_run *r, char *err, size_t errlen)
{
    gen_req g;
    run_bridge b = {r, &g};
    int rc;
    memset(&g, 0, sizeof g);
    if (!eng.cur) {
        bk_err(err, errlen, "no model is resident");
        return -1;
    }
    if (sampler_params_copy(&g.sp, r->sp) != 0) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    g.sp.n_probs = 0;
    g.prompt = r->prompt;
    g.n_prompt = r->n_prompt;
    g.n_predict = r->n_predict;
    for (size_t i = 0; i < r->n_stops && i < NAT_MAX_STOPS; i++) {
        g.stops[i] = r->stops[i];
        g.stop_lens[i] = r->stop_lens[i];
        g.n_stops++;
    }
    g.cache_prompt = 1;
    g.on_step = on_step_bridge;
    g.ud = &b;
    g.http = r->http;
    rc = run_completion(eng.cur, &g, err, errlen);
    r->n_cached = g.n_cached;
    r->n_decoded = g.n_decoded;
    r->stop = g.stop == STOP_EOS || g.stop == STOP_WORD;
    r->gone = g.gone;
    r->prompt_us = g.t_prompt_last ? g.t_prompt_last - g.t_start : 0;
    r->eval_us = g.t_gen_last && g.t_prompt_last ? g.t_gen_last - g.t_prompt_last : 0;
    r->ttft_us = g.t_first_text ? g.t_first_text - g.t_start : -1;
    free(r->text);
    r->text = NULL;
    r->text_len = g.st.text.len;
    r->text = malloc(g.st.text.len + 1);
    if (r->text) {
        if (g.st.text.len) memcpy(r->text, g.st.text.p, g.st.text.len);
        r->text[g.st.text.len] = 0;
    } else {
        r->text_len = 0;
    }
    gen_free(&g);
    return rc;
}

void native_engine_receipt(jbuf *b, const native_run *r, serve_req *req, const char *text, size_t tn)
{
    gen_req g;
    memset(&g, 0, sizeof g);
    if (!eng.cur) {
        jbuf_puts(b, "null");
        return;
    }
    g.n_prompt = r->n_prompt;
    g.n_decoded = r->n_decoded;
    g.t_start = 1;
    g.t_first_text = r->ttft_us >= 0 ? 1 + r->ttft_us : 0;
    put_receipt(b, eng.cur, &g, req, text, tn, "", 0, 0);
}
