/*
 * kit_sampler.c -- bankml's sampler (src/sampling/sampler.c) against llama.cpp b11669's own samplers, in one
 * process: the kit's libllama builds llama-server's chain with llama_sampler_init_*, bankml builds its
 * own from the same parameters, both see identical logits and histories, and every draw and every
 * candidate left by the chain (id, logit bits, probability bits, order, the sorted flag, XTC's offset)
 * must agree.
 *
 * Usage (under the kit's sid-run; built by testing/oracle_sampler.py):
 *   kit-sampler chain VOCAB.gguf CASES.jsonl     one line per case: "ok NAME STEPS" / "FAIL NAME: why"
 *   kit-sampler resolve REQUESTS.jsonl           sampler_resolve on each request: one JSON line each
 *   kit-sampler e2e MODEL.gguf CASES.jsonl       a model through libllama, drawn by bankml's sampler
 *                                                with its logprobs: one JSON line per case
 *   kit-sampler bench VOCAB.gguf ITERS           time per draw, default chain, bankml vs libllama
 *
 * A chain case: {"name", "params": {request fields}, "n_vocab", "dist", "steps", "hist": [ids],
 * "seed"}; logits come from splitmix64 + Box-Muller seeded by "seed" and the step, shaped by "dist"
 * (normal, peaked, flat, ties, onebit, neginf, wide, repeat, tiny). Exit 0 when every case ran (a FAIL
 * line is a result, not an error), 2 on an error.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "llama.h"
#include "sampling/sampler.h"

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "kit-sampler: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) die("cannot read", path);
    b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* ---- deterministic logits ---- */

static uint64_t sm_state;
static uint64_t splitmix(void) {
    uint64_t z = (sm_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unif(void) { return ((double)(splitmix() >> 11) + 0.5) / 9007199254740992.0; }
static double gauss(void) { return sqrt(-2.0 * log(unif())) * cos(6.283185307179586 * unif()); }

static void make_logits(float *l, int n, const char *dist, uint64_t seed, int step, const int32_t *hist,
                        size_t n_hist) {
    sm_state = seed * 1000003ull + (uint64_t)step * 7919ull + 12345;
    for (int i = 0; i < n; i++) {
        double g = gauss();
        float v;
        if (!strcmp(dist, "peaked")) v = (float)g;
        else if (!strcmp(dist, "flat")) v = 0.0f;
        else if (!strcmp(dist, "ties")) v = (float)(round(g * 2.0) / 2.0);
        else if (!strcmp(dist, "onebit")) v = (float)((int)(unif() * 3.0) - 1) * 1.5f;
        else if (!strcmp(dist, "neginf")) v = unif() < 0.3 ? -INFINITY : (float)(g * 2.0);
        else if (!strcmp(dist, "wide")) v = (float)(g * 8.0);
        else if (!strcmp(dist, "tiny")) v = (float)(g * 1e-3);
        else v = (float)(g * 2.0);    /* normal, repeat */
        l[i] = v;
    }
    if (!strcmp(dist, "peaked")) l[(int)(splitmix() % (uint64_t)n)] += 15.0f;
    if (!strcmp(dist, "repeat") && n_hist > 0) {
        /* favour what followed earlier occurrences of the newest token: repetitions for DRY */
        int32_t last = hist[n_hist - 1];
        for (size_t i = 0; i + 1 < n_hist; i++)
            if (hist[i] == last && hist[i + 1] >= 0 && hist[i + 1] < n) l[hist[i + 1]] += 6.0f;
        for (size_t i = n_hist > 8 ? n_hist - 8 : 0; i < n_hist; i++)
            if (hist[i] >= 0 && hist[i] < n) l[hist[i]] += 2.0f;
    }
}

/* ---- the vocabulary for DRY ---- */

static const struct llama_vocab *g_vocab;
static char g_piece[4096];

static const char *piece_cb(void *ctx, int32_t id, size_t *len) {
    (void)ctx;
    int32_t n = llama_detokenize(g_vocab, &id, 1, g_piece, (int32_t)sizeof g_piece, false, true);
    if (n < 0) n = 0;
    *len = (size_t)n;
    return g_piece;
}

static int tokenize_cb(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n) {
    (void)ctx;
    int32_t cap = (int32_t)len + 8;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t) return -1;
    int32_t k = llama_tokenize(g_vocab, text, (int32_t)len, t, cap, false, false);
    if (k < 0) {
        free(t);
        return -1;
    }
    *ids = t;
    *n = (size_t)k;
    return 0;
}

/* llama-server's chain (common_sampler_init, default order) from resolved parameters */
static struct llama_sampler *llama_chain(const sampler_params *p, int32_t n_vocab) {
    struct llama_sampler *ch = llama_sampler_chain_init(llama_sampler_chain_default_params());
    const char **br = calloc(p->n_dry_breakers + 1, sizeof *br);
    for (size_t i = 0; i < p->n_dry_breakers; i++) br[i] = p->dry_breakers[i];
    llama_sampler_chain_add(ch, llama_sampler_init_penalties(n_vocab, p->penalty_last_n, p->penalty_repeat,
                                                             p->penalty_freq, p->penalty_present));
    llama_sampler_chain_add(ch, llama_sampler_init_dry(g_vocab, p->dry_multiplier, p->dry_base,
                                                       p->dry_allowed_length, p->dry_penalty_last_n, br,
                                                       p->n_dry_breakers));
    llama_sampler_chain_add(ch, llama_sampler_init_top_n_sigma(p->top_n_sigma));
    llama_sampler_chain_add(ch, llama_sampler_init_top_k(p->top_k));
    llama_sampler_chain_add(ch, llama_sampler_init_typical(p->typ_p, (size_t)p->min_keep));
    llama_sampler_chain_add(ch, llama_sampler_init_top_p(p->top_p, (size_t)p->min_keep));
    llama_sampler_chain_add(ch, llama_sampler_init_min_p(p->min_p, (size_t)p->min_keep));
    llama_sampler_chain_add(ch, llama_sampler_init_xtc(p->xtc_probability, p->xtc_threshold,
                                                       (size_t)p->min_keep, p->seed));
    llama_sampler_chain_add(ch, llama_sampler_init_temp_ext(p->temp, p->dynatemp_range, p->dynatemp_exponent));
    llama_sampler_chain_add(ch, llama_sampler_init_dist(p->seed));
    free(br);
    return ch;
}

static const char *jstr(const json_value *o, const char *k, const char *def) {
    const char *s;
    size_t n;
    const json_value *v = json_get(o, k);
    return v && json_as_str(v, &s, &n) ? s : def;
}
static int64_t jint(const json_value *o, const char *k, int64_t def) {
    int64_t x;
    const json_value *v = json_get(o, k);
    return v && json_as_i64(v, &x) ? x : def;
}

static sampler_vocab g_sv = {NULL, piece_cb, tokenize_cb};

/* one chain case; returns 1 when it agreed on every step */
static int run_case(const json_value *c, int32_t vocab_n) {
    const char *name = jstr(c, "name", "?");
    int32_t n = (int32_t)jint(c, "n_vocab", vocab_n);
    int steps = (int)jint(c, "steps", 8);
    const char *dist = jstr(c, "dist", "normal");
    uint64_t seed = (uint64_t)jint(c, "seed", 1);
    char err[512];
    sampler_params d, p;
    sampler_params_init(&d);
    if (sampler_resolve(&p, &d, json_get(c, "params"), err, sizeof err)) {
        printf("FAIL %s: resolve: %s\n", name, err);
        sampler_params_free(&d);
        sampler_params_free(&p);
        return 0;
    }
    sampler *s = sampler_new(&p, n, &g_sv, NULL, 0, err, sizeof err);
    if (!s) {
        printf("FAIL %s: sampler_new: %s\n", name, err);
        return 0;
    }
    struct llama_sampler *ch = llama_chain(&p, n);
    llama_sampler_reset(ch);

    const json_value *h = json_get(c, "hist");
    size_t cap = (h ? h->n : 0) + (size_t)steps + 1, nh = 0;
    int32_t *hist = malloc(cap * sizeof *hist);
    for (size_t i = 0; h && i < h->n; i++) {
        int64_t t;
        json_as_i64(h->items[i], &t);
        hist[nh++] = (int32_t)t;
        sampler_accept(s, (int32_t)t);
        llama_sampler_accept(ch, (llama_token)t);
    }
    float *logits = malloc((size_t)n * sizeof *logits);
    llama_token_data *cur = malloc((size_t)n * sizeof *cur);
    int ok = 1;
    for (int step = 0; step < steps && ok; step++) {
        make_logits(logits, n, dist, seed, step, hist, nh);
        for (int32_t i = 0; i < n; i++) cur[i] = (llama_token_data){i, logits[i], 0.0f};
        llama_token_data_array arr = {cur, (size_t)n, -1, false};
        llama_sampler_apply(ch, &arr);
        int32_t want = arr.selected >= 0 ? arr.data[arr.selected].id : -1;
        int32_t got = sampler_sample(s, logits);
        size_t gn;
        int64_t gsel;
        int gsorted;
        const smp_token *gc = sampler_candidates(s, &gn, &gsel, &gsorted);
        if (got != want) {
            printf("FAIL %s: step %d: drew %d, llama.cpp %d\n", name, step, got, want);
            ok = 0;
        } else if (gn != arr.size || gsel != arr.selected || gsorted != (int)arr.sorted) {
            printf("FAIL %s: step %d: %zu candidates (selected %lld, sorted %d), llama.cpp %zu (%lld, %d)\n",
                   name, step, gn, (long long)gsel, gsorted, arr.size, (long long)arr.selected, (int)arr.sorted);
            ok = 0;
        }
        if (ok && memcmp(gc, arr.data, gn * sizeof *gc) != 0) {
            size_t i = 0;
            while (i < gn && !memcmp(&gc[i], &arr.data[i], sizeof *gc)) i++;
            printf("FAIL %s: step %d: candidate %zu: {%d, %a, %a}, llama.cpp {%d, %a, %a}\n", name, step, i,
                   gc[i].id, (double)gc[i].logit, (double)gc[i].p, arr.data[i].id, (double)arr.data[i].logit,
                   (double)arr.data[i].p);
            ok = 0;
        }
        if (!ok) break;
        sampler_accept(s, got);
        llama_sampler_accept(ch, want);
        hist[nh++] = got;
    }
    if (ok) printf("ok %s %d\n", name, steps);
    fflush(stdout);
    free(hist);
    free(logits);
    free(cur);
    llama_sampler_free(ch);
    sampler_free(s);
    sampler_params_free(&p);
    sampler_params_free(&d);
    return ok;
}

static const struct llama_model *load_vocab(const char *path) {
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = llama_model_load_from_file(path, mp);
    if (!m) die("cannot load", path);
    g_vocab = llama_model_get_vocab(m);
    return m;
}

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int mode_chain(const char *vocab_path, const char *cases) {
    load_vocab(vocab_path);
    int32_t nv = llama_vocab_n_tokens(g_vocab);
    size_t len;
    char *text = read_all(cases, &len);
    int pass = 0, fail = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (*line) {
            char err[256];
            json_value *c = json_parse(line, strlen(line), err, sizeof err);
            if (!c) die("bad case", err);
            if (run_case(c, nv)) pass++;
            else fail++;
            json_free(c);
        }
        line = nl ? nl + 1 : NULL;
    }
    fprintf(stderr, "chain: %d agree, %d differ\n", pass, fail);
    free(text);
    return 0;
}

static void put_f(jbuf *b, const char *k, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    jbuf_printf(b, "\"%s\": %u, ", k, u);
}

static int mode_resolve(const char *reqs) {
    size_t len;
    char *text = read_all(reqs, &len);
    jbuf b;
    jbuf_init(&b);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (*line) {
            char err[512];
            json_value *r = json_parse(line, strlen(line), err, sizeof err);
            if (!r) die("bad request", err);
            sampler_params d, p;
            sampler_params_init(&d);
            jbuf_reset(&b);
            if (sampler_resolve(&p, &d, r, err, sizeof err)) {
                jbuf_puts(&b, "{\"error\": ");
                json_put_cstr(&b, err);
                jbuf_puts(&b, "}");
            } else {
                jbuf_puts(&b, "{");
                jbuf_printf(&b, "\"seed\": %u, \"top_k\": %d, \"n_probs\": %d, \"min_keep\": %d, "
                            "\"repeat_last_n\": %d, \"dry_allowed_length\": %d, \"dry_penalty_last_n\": %d, "
                            "\"mirostat\": %d, ", p.seed, p.top_k, p.n_probs, p.min_keep, p.penalty_last_n,
                            p.dry_allowed_length, p.dry_penalty_last_n, p.mirostat);
                put_f(&b, "temperature", p.temp);
                put_f(&b, "top_p", p.top_p);
                put_f(&b, "min_p", p.min_p);
                put_f(&b, "top_n_sigma", p.top_n_sigma);
                put_f(&b, "xtc_probability", p.xtc_probability);
                put_f(&b, "xtc_threshold", p.xtc_threshold);
                put_f(&b, "typical_p", p.typ_p);
                put_f(&b, "dynatemp_range", p.dynatemp_range);
                put_f(&b, "dynatemp_exponent", p.dynatemp_exponent);
                put_f(&b, "repeat_penalty", p.penalty_repeat);
                put_f(&b, "frequency_penalty", p.penalty_freq);
                put_f(&b, "presence_penalty", p.penalty_present);
                put_f(&b, "dry_multiplier", p.dry_multiplier);
                put_f(&b, "dry_base", p.dry_base);
                jbuf_puts(&b, "\"dry_sequence_breakers\": [");
                for (size_t i = 0; i < p.n_dry_breakers; i++) {
                    if (i) jbuf_puts(&b, ", ");
                    json_put_str(&b, p.dry_breakers[i], p.dry_breaker_lens[i]);
                }
                jbuf_printf(&b, "], \"post_sampling_probs\": %s}", p.post_sampling_probs ? "true" : "false");
            }
            puts(b.p);
            sampler_params_free(&p);
            sampler_params_free(&d);
            json_free(r);
        }
        line = nl ? nl + 1 : NULL;
    }
    jbuf_free(&b);
    free(text);
    return 0;
}

/* A model through libllama (as llama-server runs it: prompt as one batch, then one token per step),
 * drawn by bankml's sampler over every prompt token accepted first, with n_probs as llama-server
 * reports them. One line per case: {"name", "tokens": [...], "probs": [[id, v_bits, [[id, v_bits]...]]]}
 * where v is the logprob (or, with post_sampling_probs, the probability) as a float's bits. */
static int mode_e2e(const char *model_path, const char *cases) {
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *m = llama_model_load_from_file(model_path, mp);
    if (!m) die("cannot load", model_path);
    g_vocab = llama_model_get_vocab(m);
    int32_t nv = llama_vocab_n_tokens(g_vocab);
    size_t len;
    char *text = read_all(cases, &len);
    jbuf b;
    jbuf_init(&b);
    smp_token *work = malloc((size_t)nv * sizeof *work);
    sampler_prob *top = malloc((size_t)nv * sizeof *top);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (*line) {
            char err[512];
            json_value *c = json_parse(line, strlen(line), err, sizeof err);
            if (!c) die("bad case", err);
            const json_value *req = json_get(c, "request");
            const char *prompt = jstr(req, "prompt", "");
            int n_predict = (int)jint(req, "n_predict", 8);
            struct llama_context_params cp = llama_context_default_params();
            cp.n_ctx = (uint32_t)jint(c, "n_ctx", 256);
            cp.n_threads = cp.n_threads_batch = 2;
            struct llama_context *ctx = llama_init_from_model(m, cp);
            if (!ctx) die("cannot make a context", NULL);
            int32_t toks[1024];
            int32_t nt = llama_tokenize(g_vocab, prompt, (int32_t)strlen(prompt), toks, 1024, true, true);
            sampler_params d, p;
            sampler_params_init(&d);
            jbuf_reset(&b);
            jbuf_puts(&b, "{\"name\": ");
            json_put_cstr(&b, jstr(c, "name", "?"));
            if (sampler_resolve(&p, &d, req, err, sizeof err)) {
                jbuf_puts(&b, ", \"error\": ");
                json_put_cstr(&b, err);
                jbuf_puts(&b, "}");
                puts(b.p);
            } else {
                sampler *s = sampler_new(&p, nv, &g_sv, NULL, 0, err, sizeof err);
                if (!s) die("sampler_new", err);
                for (int32_t i = 0; i < nt; i++) sampler_accept(s, toks[i]);
                llama_decode(ctx, llama_batch_get_one(toks, nt));
                jbuf_puts(&b, ", \"tokens\": [");
                jbuf b2;
                jbuf_init(&b2);
                for (int step = 0; step < n_predict; step++) {
                    const float *lg = llama_get_logits_ith(ctx, -1);
                    int32_t id = sampler_sample(s, lg);
                    sampler_accept(s, id);
                    jbuf_printf(&b, "%s%d", step ? ", " : "", id);
                    if (p.n_probs > 0) {
                        float cp_;
                        size_t k;
                        if (p.post_sampling_probs) k = sampler_post_probs(s, (size_t)p.n_probs, id, top, &cp_);
                        else k = sampler_token_probs(lg, nv, (size_t)p.n_probs, id, work, top, &cp_);
                        /* the value llama-server prints: the probability after the chain,
                         * else the log of the raw one */
                        uint32_t u;
                        float v = p.post_sampling_probs ? cp_ : sampler_logprob(cp_);
                        memcpy(&u, &v, 4);
                        jbuf_printf(&b2, "%s[%d, %u, [", step ? ", " : "", id, u);
                        for (size_t i = 0; i < k; i++) {
                            v = p.post_sampling_probs ? top[i].p : sampler_logprob(top[i].p);
                            memcpy(&u, &v, 4);
                            jbuf_printf(&b2, "%s[%d, %u]", i ? ", " : "", top[i].id, u);
                        }
                        jbuf_puts(&b2, "]]");
                    }
                    if (llama_vocab_is_eog(g_vocab, id)) break;
                    llama_token t = id;
                    if (llama_decode(ctx, llama_batch_get_one(&t, 1))) die("decode failed", NULL);
                }
                jbuf_printf(&b, "], \"probs\": [%s]}", b2.p ? b2.p : "");
                puts(b.p);
                jbuf_free(&b2);
                sampler_free(s);
            }
            fflush(stdout);
            sampler_params_free(&p);
            sampler_params_free(&d);
            llama_free(ctx);
            json_free(c);
        }
        line = nl ? nl + 1 : NULL;
    }
    jbuf_free(&b);
    free(text);
    free(work);
    free(top);
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* time per draw of llama-server's default chain (temp 0.8, top-k 40, top-p 0.95, min-p 0.05, seed
 * fixed, penalties/DRY off as by default) over the vocabulary's size, bankml vs libllama, the logits
 * copied into the candidates each time as both do; alternating blocks so drift hits both alike */
static int mode_bench(const char *vocab_path, int iters) {
    load_vocab(vocab_path);
    int32_t n = llama_vocab_n_tokens(g_vocab);
    sampler_params p;
    sampler_params_init(&p);
    p.seed = 42;
    char err[256];
    sampler *s = sampler_new(&p, n, &g_sv, NULL, 0, err, sizeof err);
    struct llama_sampler *ch = llama_chain(&p, n);
    llama_sampler_reset(ch);
    float *lg = malloc((size_t)n * sizeof *lg);
    llama_token_data *cur = malloc((size_t)n * sizeof *cur);
    double t_ours = 0, t_llama = 0;
    int agree = 0;
    for (int it = 0; it < iters; it++) {
        make_logits(lg, n, "normal", 99, it, NULL, 0);
        double t0 = now();
        int32_t a = sampler_sample(s, lg);
        double t1 = now();
        for (int32_t i = 0; i < n; i++) cur[i] = (llama_token_data){i, lg[i], 0.0f};
        llama_token_data_array arr = {cur, (size_t)n, -1, false};
        llama_sampler_apply(ch, &arr);
        double t2 = now();
        t_ours += t1 - t0;
        t_llama += t2 - t1;
        agree += a == arr.data[arr.selected].id;
    }
    printf("{\"n_vocab\": %d, \"iters\": %d, \"bankml_us\": %.1f, \"llama_us\": %.1f, \"agree\": %d}\n", n, iters,
           1e6 * t_ours / iters, 1e6 * t_llama / iters, agree);
    return 0;
}

int main(int argc, char **argv) {
    llama_log_set(quiet, NULL);
    llama_backend_init();
    if (argc == 4 && !strcmp(argv[1], "chain")) return mode_chain(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "resolve")) return mode_resolve(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "e2e")) return mode_e2e(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "bench")) return mode_bench(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: kit-sampler chain VOCAB CASES | resolve REQS | e2e MODEL CASES | bench VOCAB ITERS\n");
    return 2;
}
