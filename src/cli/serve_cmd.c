/*
 * serve_cmd.c -- `bankml serve [MODEL]`: the engine with its registry, the
 * llama-server routes, bankML's status routes and Ollama's /api/ routes on
 * one HTTP server.
 */
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/llama.h"
#include "api/ollama.h"
#include "api/status.h"
#include "api/tools.h"
#include "bankml.h"
#include "base/par.h"
#include "cli/args.h"
#include "base/log.h"
#include "cli/commands.h"
#include "file/gguf.h"
#include "sampling/grammar.h"
#include "sampling/json_schema.h"
#include "ops/kvq.h"
#include "text/template.h"

/* The sampling flags and the request fields they set (llama-server's
 * server-wide defaults, read as a request's fields over each model's GGUF
 * defaults). */
static const char *const sampling_flags[][2] = {
    {"--temp", "temperature"}, {"--top-k", "top_k"}, {"--top-p", "top_p"}, {"--min-p", "min_p"},
    {"--top-nsigma", "top_n_sigma"}, {"--xtc-probability", "xtc_probability"}, {"--xtc-threshold", "xtc_threshold"},
    {"--typical", "typical_p"}, {"--repeat-last-n", "repeat_last_n"}, {"--repeat-penalty", "repeat_penalty"},
    {"--presence-penalty", "presence_penalty"}, {"--frequency-penalty", "frequency_penalty"},
    {"--dry-multiplier", "dry_multiplier"}, {"--dry-base", "dry_base"}, {"--dry-allowed-length", "dry_allowed_length"},
    {"--dry-penalty-last-n", "dry_penalty_last_n"}, {"--adaptive-target", "adaptive_target"},
    {"--adaptive-decay", "adaptive_decay"}, {"--dynatemp-range", "dynatemp_range"},
    {"--dynatemp-exp", "dynatemp_exponent"}, {"--mirostat", "mirostat"}, {"--mirostat-lr", "mirostat_eta"},
    {"--mirostat-ent", "mirostat_tau"}, {"--seed", "seed"},
};
#define N_SAMPLING_FLAGS (sizeof sampling_flags / sizeof sampling_flags[0])

/* What the command line decided, beyond engine_opts. */
typedef struct {
    const char *model, *fork, *dir, *listen, *upstream;
    char listen_buf[300];
    void *tools;               /* --tools: GET/POST /tools (api/tools.h) */
    int jinja;
    jbuf tmpl;                 /* --chat-template(-file)'s text */
    int have_tmpl;
    jbuf keys;                 /* --api-key and --api-key-file's keys, comma-separated */
    jbuf grammar;              /* --grammar(-file) / -j / -jf: the server-wide grammar's GBNF */
    json_value *sampling;
    json_value *aliases, *tags;   /* --alias and --tags as llama-server keeps them (name_set) */
    llama_api_opts lo;
    char slot_path[4096];      /* --slot-save-path / --slot-dir with its final '/' */
    char gcp_predict[1024], gcp_health[1024];   /* AIP_PREDICT_ROUTE / AIP_HEALTH_ROUTE, with their '/' */
    long gcp_port;             /* AIP_HTTP_PORT (default 8080); -1: AIP_MODE is not PREDICTION */
    sampler_bias *bias;        /* -l/--logit-bias, in order */
} serve_cfg;

static void cfg_free(serve_cfg *c)
{
    tools_free(c->tools);
    jbuf_free(&c->tmpl);
    jbuf_free(&c->keys);
    jbuf_free(&c->grammar);
    free(c->bias);
    json_free(c->sampling);
    json_free(c->aliases);
    json_free(c->tags);
}

/* --alias / --tags as llama-server b11669 keeps them: split at ',', each
 * part stripped of isspace() at both ends, empty ones dropped, into a
 * std::set (sorted by bytes, each once). An array of strings (NULL when v
 * is NULL or memory ran out). */
static json_value *name_set(const char *v)
{
    json_value *set = v ? json_new(JSON_ARRAY, NULL, 0) : NULL;
    for (const char *p = v; set && p;) {
        const char *comma = strchr(p, ','), *z = comma ? comma : p + strlen(p);
        while (p < z && isspace((unsigned char)*p)) p++;
        while (z > p && isspace((unsigned char)z[-1])) z--;
        size_t n = (size_t)(z - p), at = 0;
        int cmp = 1;
        for (; n && at < set->n; at++) {
            size_t m = set->items[at]->len;
            cmp = memcmp(set->items[at]->str, p, m < n ? m : n);
            if (!cmp) cmp = m < n ? -1 : m > n;
            if (cmp >= 0) break;
        }
        if (n && (at == set->n || cmp != 0)) {
            json_value *s = json_new(JSON_STRING, p, n);
            if (!s || json_add(set, NULL, s) != 0) {
                json_free(set);
                return NULL;
            }
            memmove(set->items + at + 1, set->items + at, (set->n - 1 - at) * sizeof *set->items);
            set->items[at] = s;
        }
        p = comma ? comma + 1 : NULL;
    }
    return set;
}

static int refuse(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "bankml serve: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return BANKML_REFUSE;
}

/* The host prompt cache's limit (§1.3): --cache-ram N (MiB, llama-server's
 * flag, or LLAMA_ARG_CACHE_RAM), else BANKML_CACHE_RAM, else min(8192 MiB,
 * a quarter of MemAvailable) with a 1 MiB floor. 0 turns it off, a
 * negative value lifts the limit. 0, or -1 after printing why. */
static int cache_ram_opt(const parsed_args *a, engine_opts *o)
{
    const char *v = args_opt(a, "--cache-ram");
    long long mib = 8192;
    if (!v) v = getenv("BANKML_CACHE_RAM");
    if (!(v && *v)) {
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
    o->cache_on = mib != 0;
    o->cache_limit = mib > 0 ? (size_t)mib << 20 : 0;
    return 0;
}

/* A whole-number flag in [lo, hi] (def when absent): 0, or -1 after printing why. */
static int num(const parsed_args *a, const char *flag, long lo, long hi, long def, long *out)
{
    return args_long(&serve_spec, args_how(a, flag), args_opt(a, flag), lo, hi, def, out);
}

/* The model's own context length (<arch>.context_length), for -c 0. */
static long model_ctx(const char *model)
{
    gguf_report r;
    char err[512], key[160];
    size_t n;
    long ctx = -1;
    if (gguf_guard_file(model, GGUF_ENGINE_MAINLINE, &r, err, sizeof err) != 0) return -1;
    const char *arch = gguf_kv_str(gguf_kv_find(&r.header, "general.architecture"), &n);
    if (arch && n < 100) {
        snprintf(key, sizeof key, "%.*s.context_length", (int)n, arch);
        uint64_t v;
        if (gguf_kv_u64(gguf_kv_find(&r.header, key), &v) && v > 0 && v < (1u << 24)) ctx = (long)v;
    }
    gguf_report_free(&r);
    return ctx;
}

/* -ctk / -ctv (or LLAMA_ARG_CACHE_TYPE_K/_V), else BANKML_CACHE_TYPE for
 * both (the Rust original's variable), else f16; LLAMA_ATTN_ROT_DISABLE as
 * llama.cpp reads it (atoi). 0, or an exit code after printing why. */
static int cache_type_opts(const parsed_args *a, engine_opts *o)
{
    const char *env = getenv("BANKML_CACHE_TYPE");
    const char *flag[2] = {"--cache-type-k", "--cache-type-v"};
    int *dst[2] = {&o->kv_type_k, &o->kv_type_v};
    for (int i = 0; i < 2; i++) {
        const char *v = args_opt(a, flag[i]);
        kvq_type t = KVQ_F16;
        if (!v && env && *env) {
            if (kvq_parse(env, &t)) {
                fprintf(stderr, "bankml serve: BANKML_CACHE_TYPE=%s: Unsupported cache type (allowed: %s)\n", env,
                        kvq_names());
                return BANKML_EXIT_IO;
            }
        } else if (v && kvq_parse(v, &t)) {   /* llama-server's words (common/arg.cpp) */
            fprintf(stderr, "bankml serve: error while handling argument \"%s\": Unsupported cache type: %s "
                            "(allowed: %s)\n", i ? "-ctv" : "-ctk", v, kvq_names());
            return BANKML_EXIT_IO;
        }
        *dst[i] = (int)t;
    }
    const char *rd = getenv("LLAMA_ATTN_ROT_DISABLE");
    o->kv_rot_off = rd && atoi(rd) != 0;
    return 0;
}

/* The engine's options from the flags. 0, or an exit code after printing why. */
static int read_opts(const parsed_args *a, serve_cfg *c, engine_opts *o)
{
    long x, t;
    const char *v;
    memset(o, 0, sizeof *o);
    o->log_name = "bankml serve";
    o->keep_alive_ms = 5 * 60 * 1000;
    if (num(a, "--ctx-size", 0, 1 << 24, 4096, &x)) return BANKML_EXIT_IO;
    if (x == 0 && (!c->model || (x = model_ctx(c->model)) <= 0))
        return refuse("-c 0 reads the model's context length: %s%s", c->model ? "the model has none; give -c N" :
                      "name the model (-m FILE)", "");
    o->n_ctx = (size_t)x;
    if (num(a, "--threads", 1, 1024, 2, &t)) return BANKML_EXIT_IO;
    o->llama_threads = (int)t;
    if (num(a, "--threads-batch", 1, 1024, t, &x)) return BANKML_EXIT_IO;
    if (x != t)
        return refuse("refused -tb %s: bankml plays prompts with the -t split (its threads decide bits); give -tb "
                      "equal to -t (%s) or leave it out", args_opt(a, "-tb"), args_opt(a, "-t") ? args_opt(a, "-t") : "2");
    if (num(a, "--pool-threads", 1, PAR_MAX_THREADS, engine_default_threads(), &x)) return BANKML_EXIT_IO;
    o->threads = (int)x;
    if (num(a, "--batch-size", 1, 1 << 24, 2048, &x)) return BANKML_EXIT_IO;
    o->n_batch = (size_t)x;
    if (num(a, "--ubatch-size", 1, 1 << 24, 512, &x)) return BANKML_EXIT_IO;
    o->n_ubatch = (size_t)x;
    if (num(a, "--parallel", -1, 1 << 16, -1, &x)) return BANKML_EXIT_IO;
    o->n_parallel = x < 0 ? 0 : (int)x;   /* auto: the engine's one slot (llama-server's auto is 4) */
    o->kv_unified = args_bool(a, "--kv-unified", 0);   /* refused by the engine with -np > 1 */
    o->swa_full = args_bool(a, "--swa-full", 0);       /* sliding-window models: the window cache (engine) */
    if (num(a, "--ctx-checkpoints", -(1L << 30), 1L << 30, 32, &x)) return BANKML_EXIT_IO;
    o->no_checkpoints = x <= 0;   /* a window model's prompt cuts and checkpoints (engine) */
    o->ctx_checkpoints = x > 0 ? (int)x : 0;
    if (num(a, "--checkpoint-min-step", -(1L << 30), 1L << 30, 8192, &x)) return BANKML_EXIT_IO;
    o->checkpoint_min_step = x > 0 ? x : -1;
    if ((v = args_opt(a, "--slot-prompt-similarity"))) {
        char *end;
        double d = strtod(v, &end);
        if (*end || end == v || !(d >= 0 && d <= 1)) {
            fprintf(stderr, "bankml serve: -sps wants a similarity from 0 to 1, not %s\n", v);
            return BANKML_EXIT_IO;
        }
        o->slot_prompt_similarity = d == 0 ? -1.0f : (float)d;   /* the engine's -1: the rule off */
    }
    if (num(a, "--n-predict", -1, INT32_MAX, -1, &x)) return BANKML_EXIT_IO;
    c->lo.n_predict = (int32_t)x;
    if ((v = args_opt(a, "--keep-alive")) && args_duration_ms(v, &o->keep_alive_ms) != 0) {
        fprintf(stderr, "bankml serve: --keep-alive wants a duration (30s, 5m, 1h, -1), not %s\n", v);
        return BANKML_EXIT_IO;
    }
    /* The llama-server routes keep the model as llama-server does (forever), unless it is told to sleep;
     * Ollama's routes keep --keep-alive's default (5 min) as Ollama does. An explicit --keep-alive is for both. */
    if (num(a, "--sleep-idle-seconds", -1, 1 << 30, -1, &x)) return BANKML_EXIT_IO;
    if (x == 0) {   /* llama-server's own refusal of the value */
        fprintf(stderr, "bankml serve: --sleep-idle-seconds: invalid value: cannot be 0 or less than -1\n");
        return BANKML_EXIT_IO;
    }
    if (x > 0 && v) return refuse("give --sleep-idle-seconds (llama-server's) or --keep-alive (bankML's), not both%s%s",
                                  "", "");
    c->lo.keep_ms = x > 0 ? x * 1000 : v ? o->keep_alive_ms : -1;
    long mm;
    if (num(a, "--models-max", 0, 1 << 20, 4, &mm)) return BANKML_EXIT_IO;
    c->lo.models_max = (int)mm;   /* reported by the router's /props (no --model); nothing loads by it */
    c->lo.models_autoload = args_bool(a, "--models-autoload", 1);
    c->lo.sleep = x > 0;
    if (x > 0) o->keep_alive_ms = x * 1000;
    if (cache_type_opts(a, o)) return BANKML_EXIT_IO;
    return cache_ram_opt(a, o) ? BANKML_EXIT_IO : 0;
}

/* llama-server's Google Cloud compat (gcp_params in server-http.cpp): with
 * AIP_MODE=PREDICTION, AIP_PREDICT_ROUTE (default /predict) and
 * AIP_HEALTH_ROUTE (none) get a leading '/' when they lack one (an empty
 * value is the default), and AIP_HTTP_PORT (default 8080, read as stoi
 * reads it: spaces, a sign, digits, anything after ignored) replaces the
 * --port. 0, or an exit code after printing why. */
static int read_gcp(serve_cfg *c)
{
    const char *mode = getenv("AIP_MODE"), *v;
    c->gcp_port = -1;
    if (!mode || strcmp(mode, "PREDICTION")) return 0;
    v = getenv("AIP_PREDICT_ROUTE");
    snprintf(c->gcp_predict, sizeof c->gcp_predict, "%s%s", v && *v && *v != '/' ? "/" : "", v && *v ? v : "/predict");
    v = getenv("AIP_HEALTH_ROUTE");
    snprintf(c->gcp_health, sizeof c->gcp_health, "%s%s", v && *v && *v != '/' ? "/" : "", v && *v ? v : "");
    c->lo.gcp_predict = c->gcp_predict;
    c->lo.gcp_health = c->gcp_health;
    v = getenv("AIP_HTTP_PORT");
    if (!v || !*v) v = "8080";
    char *end;
    errno = 0;
    long port = strtol(v, &end, 10);
    if (end == v || errno || port < 0 || port > 65535)
        return refuse("AIP_HTTP_PORT=%s is not a port (0 to 65535)%s", v, "");
    c->gcp_port = port;
    return 0;
}

/* --host/--port over --listen (AIP_HTTP_PORT over --port). 0, or an exit code after printing why. */
static int read_listen(const parsed_args *a, serve_cfg *c)
{
    if (args_opt(a, "--allow-origin") && (args_opt(a, "--cors-origins") || args_opt(a, "--cors-methods") ||
                                          args_opt(a, "--cors-headers") || !args_bool(a, "--cors-credentials", 1)))
        return refuse("give bankML's --allow-origin or llama-server's --cors-* flags, not both%s%s", "", "");
    const char *h = args_opt(a, "--host"), *p = args_opt(a, "--port");
    long port;
    c->listen = args_opt(a, "--listen");
    char gport[24];
    if (c->gcp_port >= 0) {
        if (c->listen && !h)
            return refuse("AIP_MODE=PREDICTION sets the port (AIP_HTTP_PORT): give --host (and --port) instead of "
                          "--listen %s%s", c->listen, "");
        snprintf(gport, sizeof gport, "%ld", c->gcp_port);
        p = gport;
    }
    if (!c->listen) c->listen = "127.0.0.1:18093";
    if (!h && !p) return 0;
    if (h && strlen(h) > 5 && !strcmp(h + strlen(h) - 5, ".sock"))
        return refuse("refused --host %s: a UNIX socket is not reproduced; give TCP addresses%s", h, "");
    if (c->gcp_port >= 0) port = c->gcp_port;
    else if (num(a, "--port", 0, 65535, 18093, &port)) return BANKML_EXIT_IO;
    if (!h) h = "127.0.0.1";
    /* llama-server's comma-separated addresses, each a listener on the same port */
    size_t len = 0, n = 0;
    for (const char *q = h, *e; ; q = e + 1) {
        e = strchr(q, ',');
        size_t k = e ? (size_t)(e - q) : strlen(q);
        while (k && *q == ' ') q++, k--;
        while (k && q[k - 1] == ' ') k--;
        if (k) {
            if (++n > SERVE_MAX_LISTENERS - 1)   /* one listener is left for --upstream */
                return refuse("refused --host %s: at most 3 addresses%s", h, "");
            int w = snprintf(c->listen_buf + len, sizeof c->listen_buf - len, memchr(q, ':', k) ? "%s[%.*s]:%ld" :
                             "%s%.*s:%ld", len ? "," : "", (int)k, q, port);
            if (w < 0 || (size_t)w >= sizeof c->listen_buf - len)
                return refuse("refused --host %s: the addresses are too long%s", h, "");
            len += (size_t)w;
        }
        if (!e) break;
    }
    if (!n) return refuse("refused --host \"%s\": no address%s", h, "");
    c->listen = c->listen_buf;
    return 0;
}

/* --api-key's keys, then --api-key-file's (one a line, '#' a comment). */
static int read_keys(const parsed_args *a, serve_cfg *c)
{
    const char *k = args_opt(a, "--api-key"), *f = args_opt(a, "--api-key-file");
    if (k && *k) jbuf_puts(&c->keys, k);
    if (f) {
        FILE *fp = fopen(f, "r");
        char line[4096];
        if (!fp) {
            fprintf(stderr, "bankml serve: cannot read the --api-key-file %s: %s\n", f, strerror(errno));
            return BANKML_EXIT_IO;
        }
        while (fgets(line, sizeof line, fp)) {
            line[strcspn(line, "\r\n")] = 0;
            if (!line[0] || line[0] == '#') continue;
            if (c->keys.len) jbuf_putc(&c->keys, ',');
            jbuf_puts(&c->keys, line);
        }
        fclose(fp);
    }
    jbuf_put(&c->keys, "", 0);
    return c->keys.oom ? BANKML_EXIT_IO : 0;
}

/* The sampling flags as one JSON object of request fields, checked once
 * over llama-server's defaults. 0, or an exit code after printing why. */
static int serve_read_sampling(const parsed_args *a, serve_cfg *c)
{
    json_value *o = c->sampling = json_new(JSON_OBJECT, NULL, 0);
    char err[512];
    const char *v;
    int oom = !o;
    for (size_t k = 0; k < N_SAMPLING_FLAGS && !oom; k++) {
        if (!(v = args_opt(a, sampling_flags[k][0]))) continue;
        json_value *n = json_new(JSON_NUMBER, v, strlen(v));
        if (!n) {
            fprintf(stderr, "bankml serve: %s wants a number, not %s\n", args_how(a, sampling_flags[k][0]), v);
            return BANKML_EXIT_IO;
        }
        oom = json_add(o, sampling_flags[k][1], n) != 0;
    }
    int semi = (v = args_opt(a, "--samplers")) != NULL;
    if (!oom && (semi || (v = args_opt(a, "--sampler-seq")))) {
        json_value *seq;
        if (semi) {   /* ';'-separated names, as an array */
            seq = json_new(JSON_ARRAY, NULL, 0);
            for (const char *p = v, *e; seq; p = e + 1) {
                e = strchr(p, ';');
                if (json_add(seq, NULL, json_new(JSON_STRING, p, e ? (size_t)(e - p) : strlen(p))) != 0) {
                    json_free(seq);
                    seq = NULL;
                }
                if (!e) break;
            }
        } else {      /* the letters, as one string */
            seq = json_new(JSON_STRING, v, strlen(v));
        }
        oom = json_add(o, "samplers", seq) != 0;
    }
    if (!oom && (v = args_opt(a, "--dry-sequence-breaker"))) {
        if (!strcmp(v, "none")) {   /* no breakers: no request field says that (an empty list is refused) */
            c->lo.dry_no_breakers = 1;
        } else {
            json_value *br = json_new(JSON_ARRAY, NULL, 0);
            if (br && json_add(br, NULL, json_new(JSON_STRING, v, strlen(v))) != 0) {
                json_free(br);
                br = NULL;
            }
            oom = json_add(o, "dry_sequence_breakers", br) != 0;
        }
    }
    if (oom) {
        fprintf(stderr, "bankml serve: the sampling flags: out of memory\n");
        return BANKML_EXIT_IO;
    }
    sampler_params d, out;
    memset(&out, 0, sizeof out);   /* sampler_resolve leaves it freeable, refused or not */
    int rc = sampler_params_init(&d) != 0 ? -1 : sampler_resolve(&out, &d, c->sampling, err, sizeof err);
    sampler_params_free(&d);
    sampler_params_free(&out);
    if (rc != 0) return refuse("refused the server-wide sampling flags: %s%s", err, "");
    if (c->sampling->n) c->lo.sampling = c->sampling;
    return 0;
}

/* The server-wide grammar, as llama-server's four flags set
 * common_params.sampling.grammar: --grammar TEXT, --grammar-file FNAME (its
 * bytes), -j SCHEMA and -jf FILE (json_schema_to_grammar of the schema, at
 * start: a schema it rejects, or JSON that does not parse, exits with
 * llama-server's words). Each flag replaces the others' value, so the last
 * one on the command line would win there; bankml takes one. The GBNF itself
 * is parsed at start against the startup model (check_model). 0, or an exit
 * code after printing why. */
static int serve_read_grammar(const parsed_args *a, serve_cfg *c)
{
    static const char *const flags[] = {"--grammar", "--grammar-file", "--json-schema", "--json-schema-file"};
    const char *v = NULL;
    int which = -1, n = 0;
    for (int i = 0; i < 4; i++)
        if (args_opt(a, flags[i])) {
            v = args_opt(a, flags[i]);
            which = i;
            n++;
        }
    if (n == 0) return 0;
    if (n > 1)
        return refuse("give one of --grammar, --grammar-file, -j and -jf%s%s (llama-server keeps the last one "
                      "on its command line; bankml does not guess the order)", "", "");
    const char *how = args_how(a, flags[which]);
    jbuf text;
    jbuf_init(&text);
    if (which == 1 || which == 3) {   /* read_file / std::ifstream: the whole file */
        FILE *f = fopen(v, "rb");
        if (!f || jbuf_read_stream(&text, f) != 0) {
            fprintf(stderr, "bankml serve: error while handling argument \"%s\": error: failed to open file '%s'\n",
                    how, v);
            if (f) fclose(f);
            jbuf_free(&text);
            return BANKML_EXIT_IO;
        }
        fclose(f);
    } else {
        jbuf_puts(&text, v);
    }
    if (text.oom) {
        jbuf_free(&text);
        return BANKML_EXIT_IO;
    }
    if (which <= 1) {
        c->grammar = text;
    } else {
        char err[512], *out = NULL;
        size_t len = 0;
        json_value *schema = json_parse(text.p ? text.p : "", text.len, err, sizeof err);
        jbuf_free(&text);
        if (!schema) {
            fprintf(stderr, "bankml serve: error while handling argument \"%s\": the schema is not JSON: %s\n", how,
                    err);
            return BANKML_REFUSE;
        }
        int rc = json_schema_to_gbnf(schema, 0, &out, &len);
        json_free(schema);
        if (rc != JSON_SCHEMA_OK) {
            fprintf(stderr, "bankml serve: error while handling argument \"%s\": %s\n", how,
                    out ? out : "out of memory");
            free(out);
            return BANKML_REFUSE;
        }
        jbuf_put(&c->grammar, out ? out : "", out ? len : 0);
        free(out);
        if (c->grammar.oom) return BANKML_EXIT_IO;
    }
    c->lo.grammar = c->grammar.p ? c->grammar.p : "";
    c->lo.grammar_len = c->grammar.len;
    c->lo.grammar_prefill = which >= 2;
    return 0;
}

/* One -l value as llama-server's handler reads it from a stringstream:
 * `ss >> key` (an int: space, sign, digits), `ss >> sign` (the next
 * non-space byte, + or -), getline for the rest (at least one byte), then
 * std::stof of it (space, a float, anything after ignored; out of range is
 * an error). 0, or -1 for its "invalid input format". */
static int serve_parse_bias(const char *v, sampler_bias *out)
{
    const char *p = v;
    char *end;
    while (isspace((unsigned char)*p)) p++;
    errno = 0;
    long key = strtol(p, &end, 10);
    if (end == p || errno || key < INT32_MIN || key > INT32_MAX) return -1;
    for (p = end; isspace((unsigned char)*p); p++) {}
    char sign = *p;
    if (sign != '+' && sign != '-') return -1;
    p++;
    if (!*p) return -1;
    errno = 0;
    float f = strtof(p, &end);
    if (end == p || errno == ERANGE) return -1;
    out->token = (int32_t)key;
    out->bias = f * (sign == '-' ? -1.0f : 1.0f);
    return 0;
}

/* -l/--logit-bias TOKEN_ID(+/-)BIAS, each use appended (llama-server lets it
 * repeat). 0, or an exit code after printing why. */
static int serve_read_bias(int argc, char **argv, serve_cfg *c)
{
    size_t n = args_each(&serve_spec, argc, argv, "--logit-bias", NULL, 0);
    if (!n) return 0;
    const char **v = calloc(n, sizeof *v);
    c->bias = calloc(n, sizeof *c->bias);
    if (!v || !c->bias) {
        free(v);
        return BANKML_EXIT_IO;
    }
    args_each(&serve_spec, argc, argv, "--logit-bias", v, n);
    for (size_t i = 0; i < n; i++)
        if (serve_parse_bias(v[i], &c->bias[i]) != 0) {
            fprintf(stderr, "bankml serve: error while handling argument \"-l\": invalid input format (%s)\n", v[i]);
            free(v);
            return BANKML_REFUSE;
        }
    free(v);
    c->lo.logit_bias = c->bias;
    c->lo.n_logit_bias = n;
    return 0;
}

/* --jinja, --chat-template, --chat-template-file. 0, or an exit code. */
static int read_template(const parsed_args *a, serve_cfg *c, engine_opts *o)
{
    const char *name = args_opt(a, "--chat-template"), *file = args_opt(a, "--chat-template-file");
    c->jinja = args_bool(a, "--jinja", 1);
    o->no_jinja = !c->jinja;
    if (name && file) return refuse("give --chat-template or --chat-template-file, not both%s%s", "", "");
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f || jbuf_read_stream(&c->tmpl, f) != 0) {
            fprintf(stderr, "bankml serve: cannot read the --chat-template-file %s: %s\n", file, strerror(errno));
            if (f) fclose(f);
            return BANKML_EXIT_IO;
        }
        fclose(f);
    } else if (name) {
        jbuf_puts(&c->tmpl, name);
    }
    /* the chat layer's flags: --reasoning on|off|auto, --reasoning-format, --reasoning-budget (values the
     * table's `ok` lists; the rest were refused) */
    const char *rea = args_opt(a, "--reasoning"), *rf = args_opt(a, "--reasoning-format"),
               *rb = args_opt(a, "--reasoning-budget");
    o->reasoning_off = rea && !strcmp(rea, "off");
    int f;
    if (rf && llama_reasoning_format_from_name(rf, &f) == 0) c->lo.reasoning_format = f;
    if (rb) {
        char *end;
        long v = strtol(rb, &end, 10);
        if (*end || end == rb || v < -1 || v > INT32_MAX)
            return refuse("--reasoning-budget %s: a number of tokens, -1 for none%s", rb, "");
        c->lo.reasoning_budget = (int32_t)v;
    }
    if (!name && !file) return 0;
    jbuf_put(&c->tmpl, "", 0);
    if (c->tmpl.oom) return BANKML_EXIT_IO;
    c->have_tmpl = 1;
    /* llama-server's check after its flags (common_chat_verify_template): without Jinja the text must be
     * a built-in name or contain a known format's markers; its two lines, then exit */
    if (!c->jinja && c->tmpl.len && template_legacy_detect(c->tmpl.p) < 0) {
        fprintf(stderr, "bankml serve: error: the supplied chat template is not supported: %s\n"
                        "note: llama.cpp was started without --jinja, we only support commonly used templates\n",
                c->tmpl.p);
        return BANKML_REFUSE;
    }
    o->chat_template = c->tmpl.p;
    o->chat_template_len = c->tmpl.len;
    return 0;
}

/* --slot-save-path DIR (llama-server's: an existing directory, else its
 * "not a directory" and exit 1) or --slot-dir DIR (bankml's: created when
 * missing, one level), kept with a final '/' as llama-server keeps it. */
static int read_slot_path(const parsed_args *a, serve_cfg *c)
{
    const char *sp = args_opt(a, "--slot-save-path"), *sd = args_opt(a, "--slot-dir");
    struct stat st;
    if (sp && sd) return refuse("--slot-save-path %s and --slot-dir %s: name one directory", sp, sd);
    if (!sp && !sd) return 0;
    const char *d = sp ? sp : sd;
    if (sd && d[0] && mkdir(d, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "bankml serve: --slot-dir %s: cannot create it: %s\n", d, strerror(errno));
        return 1;
    }
    if (!d[0] || stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "bankml serve: error while handling argument \"%s\": not a directory: %s\n",
                sp ? "--slot-save-path" : "--slot-dir", d);
        return 1;
    }
    size_t n = strlen(d);
    if (n + 2 > sizeof c->slot_path) return refuse("%s%s: the path is too long", d, "");
    snprintf(c->slot_path, sizeof c->slot_path, "%s%s", d, d[n - 1] == '/' ? "" : "/");
    c->lo.slot_save_path = c->slot_path;
    return 0;
}

/* Every flag into c and o: the refusals first. 0, or an exit code after printing why. */
static int serve_read_flags(const parsed_args *a, serve_cfg *c, engine_opts *o)
{
    int rc;
    kvq_type tv;
    const char *fa = args_opt(a, "--flash-attn"), *ctv = args_opt(a, "--cache-type-v");
    if (!ctv) ctv = getenv("BANKML_CACHE_TYPE");
    if (fa && !strcmp(fa, "off") && ctv && !kvq_parse(ctv, &tv) && kvq_info_of(tv)->quantized)   /* llama-server's exit */
        return refuse("quantized V cache requires flash_attn to be enabled (-ctv %s with -fa off)%s", ctv, "");
    if (args_refusals(a)) return BANKML_REFUSE;
    c->model = a->n_pos ? a->pos[0] : NULL;
    if (args_opt(a, "--model")) {
        if (c->model && strcmp(c->model, args_opt(a, "--model")))
            return refuse("two models: %s and %s (name one; more are served with --registry)", c->model,
                          args_opt(a, "--model"));
        c->model = args_opt(a, "--model");
    }
    c->fork = args_opt(a, "--fork");
    if (!c->fork) c->fork = "models.FORK.json";
    c->dir = args_opt(a, "--registry");
    c->upstream = args_opt(a, "--upstream");
    llama_api_opts_init(&c->lo);
    c->aliases = name_set(args_opt(a, "--alias"));
    c->tags = name_set(args_opt(a, "--tags"));
    c->lo.aliases = c->aliases;
    c->lo.tags = c->tags;
    c->lo.metrics = args_bool(a, "--metrics", 0);
    c->lo.slots = args_bool(a, "--slots", 1);
    if ((rc = read_gcp(c)) || (rc = read_slot_path(a, c)) || (rc = read_opts(a, c, o)) || (rc = read_listen(a, c)) || (rc = read_keys(a, c)) || (rc = serve_read_sampling(a, c)) ||
        (rc = serve_read_grammar(a, c)) || (rc = read_template(a, c, o)))
        return rc;
    /* the startup model's name in answers (engine_alias): the first alias; read_opts cleared o */
    o->alias = c->aliases && c->aliases->n ? c->aliases->items[0]->str : NULL;
    return 0;
}

/* The registry: the startup model first, then the fork's or the
 * directory's pins; the default is the startup model or the first pinned
 * file that is here. 0, or -1 after printing why. */
static int fill_registry(engine *e, const char *model, const char *fork, const char *dir)
{
    char fdir[4096], mdir[4096 + 8];
    snprintf(fdir, sizeof fdir, "%s", fork);
    char *slash = strrchr(fdir, '/');
    if (slash) *slash = 0;
    else snprintf(fdir, sizeof fdir, ".");
    snprintf(mdir, sizeof mdir, "%s/models", fdir);
    if (model) {
        struct stat st;
        if (stat(model, &st) != 0) {
            fprintf(stderr, "bankml serve: cannot read %s: %s\n", model, strerror(errno));
            return -1;
        }
        engine_add(e, model, model, fork, 1);
    }
    if (dir) {
        char near[4096];
        snprintf(near, sizeof near, "%s", model ? model : dir);
        char *s2 = strrchr(near, '/');
        if (model && s2) *s2 = 0;
        else if (model) snprintf(near, sizeof near, ".");
        engine_add_dir(e, dir, near);
    } else if (!model) {
        engine_add_fork(e, fork, fdir, mdir);
    }
    if (engine_n_entries(e) == 0) {   /* llama-server without -m: a router, here with no models */
        fprintf(stderr, "bankml serve: no model: serving llama-server's router with no models (every completion is "
                        "refused); name one, or give a --registry whose FORK.json files pin some\n");
        return 0;
    }
    engine_entry en;
    for (size_t i = 0; !model && engine_entry_get(e, i, &en) == 0; i++)
        if (en.present) {
            engine_set_default(e, i);
            break;
        }
    return 0;
}

/* The --log-* flags (and --log-format) into the log (base/log.h); -v or
 * -lv over 9 also make answers carry __verbose (c->lo.verbose). 0, or an
 * exit code after printing why. */
static int serve_read_log(const parsed_args *a, serve_cfg *c)
{
    bk_log_opts lo;
    char err[600];
    bk_log_opts_init(&lo);
    const char *fmt = args_opt(a, "--log-format"), *col = args_opt(a, "--log-colors"), *lv = args_opt(a, "-lv");
    if (fmt && strcmp(fmt, "text") && strcmp(fmt, "json"))
        return refuse("--log-format wants text or json, not %s%s", fmt, "");
    lo.json = (fmt && !strcmp(fmt, "json")) || args_bool(a, "--log-jsonl", 0);
    lo.disabled = args_opt(a, "--log-disable") != NULL;
    lo.file = args_opt(a, "--log-file");
    if (col && strcmp(col, "on") && strcmp(col, "off") && strcmp(col, "auto"))
        return refuse("--log-colors: unknown value '%s' (on, off or auto)%s", col, "");
    lo.colors = col && !strcmp(col, "on") ? 1 : col && !strcmp(col, "off") ? 0 : isatty(2);
    if (lo.json) lo.colors = 0;   /* llama-server: JSON lines are never coloured */
    lo.prefix = args_bool(a, "--log-prefix", 0);
    lo.timestamps = args_bool(a, "--log-timestamps", 0);
    if (lv) {
        char *end;
        errno = 0;
        long v = strtol(lv, &end, 10);
        if (end == lv || *end || errno || v < INT32_MIN || v > INT32_MAX)
            return refuse("%s wants a number, not %s", args_how(a, "-lv"), lv);
        lo.verbosity = (int)v;
    }
    if (args_opt(a, "--verbose")) lo.verbosity = INT32_MAX;   /* llama-server: -v wins, whatever the order */
    c->lo.verbose = lo.verbosity > 9;
    if (bk_log_setup(&lo, err, sizeof err) != 0) {
        fprintf(stderr, "bankml serve: %s\n", err);
        return BANKML_EXIT_IO;
    }
    return 0;
}

static void print_start(engine *e, const char *listen, const char *upstream)
{
    engine_entry en, def;
    engine_status_info st;
    jbuf names;
    jbuf_init(&names);
    for (size_t i = 0; engine_entry_get(e, i, &en) == 0; i++) jbuf_printf(&names, "%s%s", i ? ", " : "", en.name);
    if (engine_entry_get(e, engine_default(e), &def) != 0) def.path = "no model";
    engine_status_get(e, &st);
    free(st.verified_json);
    bk_log(BK_LOG_GENERIC, "bankml serve %s --native: %s verified (sha256 %s); models %s; listening on http://%s%s%s",
           BANKML_VERSION, def.path, st.last_sha, names.p ? names.p : "", listen,
            upstream ? " and, for llama-server's clients, http://" : "", upstream ? upstream : "");
    jbuf_free(&names);
}

/* The shutdown line: what was served since start. */
static void serve_log_stop(engine *e, int rc)
{
    engine_metrics *met = malloc(sizeof *met);
    if (!met) return;
    engine_metrics_get(e, met, 0);
    bk_log(BK_LOG_GENERIC, "bankml serve: stopped%s; served %llu prompt tokens and %llu generated since start",
           rc == BANKML_OK ? "" : " with an error", (unsigned long long)met->tot_prompt,
           (unsigned long long)met->tot_completion);
    free(met);
}

/* The HTTP server with every route, listening. NULL after printing why. */
static serve_server *open_server(engine *e, serve_cfg *c, const parsed_args *a, llama_api **la, status_api **sa)
{
    char err[1024];
    serve_opts so;
    serve_opts_default(&so);
    /* llama-server reads any POST body as JSON whatever its Content-Type, and
     * `curl -d` sends form encoding: refusing it would break its clients. */
    so.json_posts_only = 0;
    so.api_keys = c->keys.len ? c->keys.p : NULL;
    so.allow_origins = args_opt(a, "--allow-origin");
    /* --tools: b11669 checks the names at start ("tools setup failed") and, without an explicit
     * --cors-origins, answers CORS for localhost origins only */
    unsigned tools = 0;
    if (args_opt(a, "--tools") && tools_parse_list(args_opt(a, "--tools"), &tools, err, sizeof err) != 0) {
        fprintf(stderr, "bankml serve: tools setup failed: %s\n", err);
        return NULL;
    }
    so.cors_origins = args_opt(a, "--cors-origins") ? args_opt(a, "--cors-origins") : tools ? "localhost" : NULL;
    so.cors_methods = args_opt(a, "--cors-methods");
    so.cors_headers = args_opt(a, "--cors-headers");
    so.cors_no_credentials = !args_bool(a, "--cors-credentials", 1);
    so.log_name = "bankml serve";

    serve_server *srv = serve_new(&so, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "bankml serve: %s\n", err);
        return NULL;
    }
    *la = llama_api_register(srv, e);
    *sa = status_register(srv, e, c->upstream);
    if (*la && *sa && llama_api_configure(*la, &c->lo) != 0) {   /* it said why */
        serve_free(srv);
        return NULL;
    }
    if (!*la || !*sa || ollama_register(srv, e, c->dir) != 0) {
        fprintf(stderr, "bankml serve: out of memory\n");
        serve_free(srv);
        return NULL;
    }
    if (!(c->tools = tools_register(srv, tools))) {
        fprintf(stderr, "bankml serve: out of memory\n");
        serve_free(srv);
        return NULL;
    }
    status_set_metrics(*sa, c->lo.metrics);
    status_set_ui(*sa, args_bool(a, "--ui", 1));
    /* each address of the list; with port 0 the later ones take the port the kernel gave the first */
    char one[320];
    for (const char *q = c->listen, *e; ; q = e + 1) {
        e = strchr(q, ',');
        size_t k = e ? (size_t)(e - q) : strlen(q);
        int li = -1;
        snprintf(one, sizeof one, "%.*s", (int)k, q);
        if (q != c->listen && k > 2 && !strcmp(one + strlen(one) - 2, ":0"))
            snprintf(one + strlen(one) - 1, sizeof one - (strlen(one) - 1), "%d", serve_port(srv, 0));
        if (k >= sizeof one || (li = serve_listen(srv, one, err, sizeof err)) < 0) {
            fprintf(stderr, "bankml serve: %s\n", li < 0 && k < sizeof one ? err : "an address is too long");
            serve_free(srv);
            return NULL;
        }
        if (!e) break;
    }
    if (c->upstream && serve_listen(srv, c->upstream, err, sizeof err) < 0) {
        fprintf(stderr, "bankml serve: cannot listen on the engine address %s: %s (is llama-server running there?)\n",
                c->upstream, err);
        serve_free(srv);
        return NULL;
    }
    return srv;
}

/* A grammar's <piece> references, as llama-server tokenizes them (no BOS, specials parsed). */
static int serve_grammar_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n)
{
    char terr[128];
    return engine_tokenize_with(ctx, text, len, 0, 1, ids, n, terr, sizeof terr);
}

/* What llama-server checks on the model at start: the template must render
 * (with --no-jinja it must still parse as Jinja: common_chat_templates_init
 * parses it either way; a text with no built-in format starts, and each
 * render answers 500 then); the server-wide grammar must parse. 0, or an
 * exit code. */

static int check_model(engine *e, engine_model *m, const serve_cfg *c)
{
    char err[1024];
    size_t tl;
    const char *t = engine_model_template(m, &tl);
    (void)e;
    static const char probe[] = "[{\"role\":\"user\",\"content\":\"test\"}]";
    json_value *msgs = json_parse(probe, sizeof probe - 1, err, sizeof err);
    jbuf out;
    jbuf_init(&out);
    int rc = !msgs ? -1 : !c->jinja ? template_check(t, tl, err, sizeof err)
                                    : engine_render(m, msgs, &out, err, sizeof err);
    jbuf_free(&out);
    json_free(msgs);
    if (rc != 0) {
        fprintf(stderr, "bankml serve: the chat template does not render (llama-server refuses it too): %s\n", err);
        return BANKML_EXIT_IO;
    }
    /* the server-wide grammar: llama-server parses it when it builds the slots' samplers at load, and a
     * grammar that does not parse ends it there ("failed to parse grammar", uncaught) */
    if (c->lo.grammar && c->lo.grammar_len && c->lo.grammar[0]) {
        gr_tokenizer tk = {m, serve_grammar_tokenize};
        gr_grammar *g = gr_parse(c->lo.grammar, c->lo.grammar_len, &tk, err, sizeof err);
        if (!g) {
            fprintf(stderr, "bankml serve: the server-wide grammar: failed to parse grammar (%s; llama-server "
                            "stops at load with the same words)\n", err);
            return BANKML_REFUSE;
        }
        gr_free(g);
    }
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    parsed_args a;
    engine_opts o;
    engine_error er = {0};
    llama_api *la = NULL;
    status_api *sa = NULL;
    serve_cfg c;
    int rc;
    memset(&c, 0, sizeof c);
    jbuf_init(&c.tmpl);
    jbuf_init(&c.keys);
    jbuf_init(&c.grammar);
    if (args_parse(&serve_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&serve_spec), BANKML_OK;
    if (args_opt(&a, "--version")) {
        printf("bankml %s (llama-server b11669's command line)\n", BANKML_VERSION);
        return BANKML_OK;
    }
    if ((rc = serve_read_flags(&a, &c, &o)) || (rc = serve_read_bias(argc, argv, &c)) || (rc = serve_read_log(&a, &c)))
        goto fail;
    rc = BANKML_EXIT_IO;
    /* Memory that settles under load (issue #22.7): the prompt cache's states and the answers' buffers are
     * large blocks freed in any order by many connection threads; with glibc's sliding mmap threshold they
     * come to live in the arenas, where freed space is kept and fragments. A fixed threshold maps each one and
     * gives it back on free; two arenas bound what the per-thread ones keep. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    mallopt(M_ARENA_MAX, 2);
    engine *e = engine_new(&o, &er);
    if (!e) {
        fprintf(stderr, "bankml serve: %s\n", er.msg);
        rc = er.kind == ENGINE_BAD_INPUT ? BANKML_REFUSE : BANKML_EXIT_IO;
        goto fail;
    }
    if (fill_registry(e, c.model, c.fork, c.dir) != 0) goto fail_e;
    if (engine_n_entries(e) > 0) {
        engine_model *m = engine_acquire(e, engine_default(e), NULL, &er);
        if (!m) {
            fprintf(stderr, "bankml serve: %s\n", er.msg);
            rc = er.kind == ENGINE_NOT_FOUND || er.kind == ENGINE_INTERNAL ? BANKML_EXIT_IO : BANKML_REFUSE;
            goto fail_e;
        }
        rc = check_model(e, m, &c);
        engine_release(e, c.lo.keep_ms);
        if (rc) goto fail_e;
    } else if (c.lo.sleep) {
        rc = refuse("--sleep-idle-seconds needs a model%s%s", "", "");
        goto fail_e;
    }
    rc = BANKML_EXIT_IO;
    serve_server *srv = open_server(e, &c, &a, &la, &sa);
    if (!srv) {
        llama_api_free(la);
        status_free(sa);
        goto fail_e;
    }
    if (c.lo.sleep && llama_api_prime(la) != 0) {
        fprintf(stderr, "bankml serve: the startup model could not be read again for /props\n");
        serve_free(srv);
        llama_api_free(la);
        status_free(sa);
        goto fail_e;
    }
    serve_install_signals(srv);
    engine_start_reaper(e);
    print_start(e, c.listen, c.upstream);
    rc = serve_run(srv) == 0 ? BANKML_OK : BANKML_EXIT_IO;
    serve_log_stop(e, rc);
    serve_free(srv);
    llama_api_free(la);
    status_free(sa);
fail_e:
    engine_free(e);
fail:
    cfg_free(&c);
    return rc;
}
