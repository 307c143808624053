/*
 * main.c -- the bankml command line.
 *
 * Exit codes, after gguf_guard.py: 0 play/ok, 2 refuse, 3 need more header
 * bytes (a truncated file), 1 usage or I/O. Every command prints its usage
 * line on bad arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>
#include <time.h>

#include "base/progress.h"
#include "bankml.h"
#include "cli/args.h"
#include "base/base.h"
#include "graph/arch.h"
#include "graph/forward.h"
#include "ops/kvq.h"
#include "file/gguf.h"
#include "base/json.h"
#include "cli/commands.h"
#include "api/ollama.h"
#include "api/status.h"
#include "file/pin.h"
#include "base/sha256.h"
#include "text/template.h"
#include "text/tokenizer.h"
#include "file/verify.h"

static int engine_of(const command_spec *c, const parsed_args *a, gguf_engine *e)
{
    const char *v = args_opt(a, "--engine");
    *e = GGUF_ENGINE_MAINLINE;
    if (!v || strcmp(v, "mainline") == 0) return 0;
    if (strcmp(v, "prism") == 0) {
        *e = GGUF_ENGINE_PRISM;
        return 0;
    }
    fprintf(stderr, "bankml %s: --engine takes mainline or prism, not %s\n", c->name, v);
    args_usage(c);
    return 1;
}

static void print_jbuf(FILE *f, jbuf *b)
{
    if (b->oom) {
        fprintf(stderr, "bankml: out of memory\n");
        return;
    }
    if (b->len) fwrite(b->p, 1, b->len, f);
}

/* ---- commands ----------------------------------------------------------- */

static const arg_opt guard_opts[] = {
    ARGS_HELP_ROW,
    {"--engine", NULL, "mainline|prism", NULL, "mainline", "the engine whose rules the guard applies", ARG_OWN, NULL, NULL},
    {"--json", NULL, NULL, NULL, "", "the report as one JSON object", ARG_OWN, NULL, NULL},
};
static const command_spec guard_spec = {
    "guard", "guard FILE [--engine mainline|prism] [--json]",
    "reads a GGUF's header only and says whether bankml plays it, refuses it (and why) or needs more bytes", 1, 0,
    ARGS_TABLE(guard_opts)};

static int cmd_guard(int argc, char **argv)
{
    parsed_args a;
    gguf_engine engine;
    gguf_report r;
    char err[512];
    jbuf b;
    int rc;

    if (args_parse(&guard_spec, argc, argv, &a) || engine_of(&guard_spec, &a, &engine))
        return BANKML_EXIT_IO;
    if (a.help) return args_help(&guard_spec), BANKML_OK;
    if (gguf_guard_file(a.pos[0], engine, &r, err, sizeof err) != 0) {
        fprintf(stderr, "bankml guard: cannot read %s: %s\n", a.pos[0], err);
        return BANKML_EXIT_IO;
    }
    jbuf_init(&b);
    if (args_opt(&a, "--json")) {
        gguf_report_json(&r, &b);
        jbuf_putc(&b, '\n');
    } else {
        gguf_report_text(&r, &b);
    }
    print_jbuf(stdout, &b);
    rc = b.oom ? BANKML_EXIT_IO : gguf_verdict_exit(r.verdict);
    jbuf_free(&b);
    gguf_report_free(&r);
    return rc;
}

static const arg_opt sha256_opts[] = {ARGS_HELP_ROW};
static const command_spec sha256_spec = {"sha256", "sha256 FILE", "prints the file's SHA-256, as sha256sum does", 1, 0,
                                         ARGS_TABLE(sha256_opts)};

static int cmd_sha256(int argc, char **argv)
{
    parsed_args a;
    uint8_t d[32];
    char hex[65];

    if (args_parse(&sha256_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&sha256_spec), BANKML_OK;
    if (sha256_file(a.pos[0], d) != 0) {
        fprintf(stderr, "bankml sha256: cannot read %s: %s\n", a.pos[0], strerror(errno));
        return BANKML_EXIT_IO;
    }
    sha256_hex(d, hex);
    printf("%s  %s\n", hex, a.pos[0]);
    return BANKML_OK;
}

static const arg_opt pin_opts[] = {
    ARGS_HELP_ROW,
    {"--fork", NULL, "FORK.json", NULL, "", "the pin file (required)", ARG_OWN, NULL, NULL},
    {"--write", NULL, NULL, NULL, "", "record the file's size and SHA-256 in it (atomically) instead of checking them", ARG_OWN, NULL, NULL},
};
static const command_spec pin_spec = {
    "pin", "pin FILE --fork FORK.json [--write]", "checks a file against its pin, or writes the pin", 1, 0,
    ARGS_TABLE(pin_opts)};

static int cmd_pin(int argc, char **argv)
{
    parsed_args a;
    const char *fork;
    char sha[65], err[1024];
    int rc;

    if (args_parse(&pin_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&pin_spec), BANKML_OK;
    fork = args_opt(&a, "--fork");
    if (!fork) {
        fprintf(stderr, "bankml pin: --fork FORK.json is required\n");
        args_usage(&pin_spec);
        return BANKML_EXIT_IO;
    }
    if (args_opt(&a, "--write"))
        rc = pin_write(a.pos[0], fork, sha, err, sizeof err);
    else
        rc = pin_check(a.pos[0], fork, sha, err, sizeof err);
    if (rc == 0) {
        printf("pinned %s\n", sha);
        return BANKML_OK;
    }
    if (rc == 2) {
        printf("refuse: %s\n", err);
        return BANKML_REFUSE;
    }
    fprintf(stderr, "bankml pin: %s\n", err);
    return BANKML_EXIT_IO;
}

static const arg_opt verify_opts[] = {
    ARGS_HELP_ROW,
    {"--fork", NULL, "FORK.json", NULL, "", "the pin file (required)", ARG_OWN, NULL, NULL},
    {"--engine", NULL, "mainline|prism", NULL, "mainline", "the engine whose rules the guard applies", ARG_OWN, NULL, NULL},
    {"--json", NULL, NULL, NULL, "", "the verdict as one JSON object", ARG_OWN, NULL, NULL},
};
static const command_spec verify_spec = {
    "verify", "verify FILE --fork FORK.json [--engine mainline|prism] [--json]",
    "the guard, then the pin: what every model-loading path runs first", 1, 0, ARGS_TABLE(verify_opts)};

static int cmd_verify(int argc, char **argv)
{
    parsed_args a;
    gguf_engine engine;
    const char *fork;
    bankml_verified *v;
    char err[1024];
    jbuf b;
    int rc;

    if (args_parse(&verify_spec, argc, argv, &a) || engine_of(&verify_spec, &a, &engine))
        return BANKML_EXIT_IO;
    if (a.help) return args_help(&verify_spec), BANKML_OK;
    fork = args_opt(&a, "--fork");
    if (!fork) {
        fprintf(stderr, "bankml verify: --fork FORK.json is required\n");
        args_usage(&verify_spec);
        return BANKML_EXIT_IO;
    }
    rc = bankml_verify(a.pos[0], fork, (bankml_engine)engine, &v, err, sizeof err);
    jbuf_init(&b);
    if (args_opt(&a, "--json")) {
        if (rc == BANKML_OK) verify_json(v, &b);
        else verify_refusal_json(err, &b);
        jbuf_putc(&b, '\n');
    } else if (rc == BANKML_OK) {
        jbuf_printf(&b, "play pinned %s\n", v->sha256);
    } else {
        jbuf_printf(&b, "refuse: %s\n", err);
    }
    print_jbuf(stdout, &b);
    jbuf_free(&b);
    bankml_verified_free(v);
    return rc;
}

/* ---- model-reading commands: the guard first, always ------------------- */

/* Reads all of stdin into b. Returns 0, or 1 after printing why. */
static int read_stdin(const char *cmd, jbuf *b)
{
    if (jbuf_read_stream(b, stdin) != 0) {
        fprintf(stderr, "bankml %s: cannot read standard input: %s\n", cmd, strerror(errno));
        return 1;
    }
    return 0;
}

/* Runs the guard on a model before any other part of it is read, and loads
 * its vocabulary. Returns 0 with *v (and *r when r is not NULL, holding the
 * parsed header), or an exit code after printing the reason. */
static int open_vocab(const char *cmd, const char *path, tok_vocab **v, gguf_report *r)
{
    gguf_report own;
    char err[1024];
    gguf_report *rep = r ? r : &own;

    *v = NULL;
    if (gguf_guard_file(path, GGUF_ENGINE_MAINLINE, rep, err, sizeof err) != 0) {
        fprintf(stderr, "bankml %s: cannot read %s: %s\n", cmd, path, err);
        return BANKML_EXIT_IO;
    }
    if (rep->verdict != GGUF_VERDICT_PLAY) {
        int rc = gguf_verdict_exit(rep->verdict);
        fprintf(stderr, "bankml %s: %s: the guard says %s%s%s\n", cmd, path,
                gguf_verdict_str(rep->verdict), rep->n_reasons ? ": " : "",
                rep->n_reasons ? rep->reasons[0].text : "");
        gguf_report_free(rep);
        return rc;
    }
    *v = tok_load(path, err, sizeof err);
    if (!*v) {
        fprintf(stderr, "bankml %s: %s: %s\n", cmd, path, err);
        gguf_report_free(rep);
        return BANKML_REFUSE;
    }
    if (!r) gguf_report_free(rep);
    return 0;
}

static const arg_opt tokenize_opts[] = {
    ARGS_HELP_ROW,
    {"--no-special", NULL, NULL, NULL, "", "read special-token texts as plain text", ARG_OWN, NULL, NULL},
};
static const command_spec tokenize_spec = {
    "tokenize", "tokenize MODEL [--no-special] < text", "standard input's tokens, as llama-server's /tokenize", 1, 0,
    ARGS_TABLE(tokenize_opts)};

/* As llama-server's /tokenize with add_special false: no BOS/EOS added,
 * special-token texts parsed unless --no-special. */
static int cmd_tokenize(int argc, char **argv)
{
    parsed_args a;
    tok_vocab *v;
    int32_t *ids = NULL;
    size_t n = 0;
    char err[512];
    jbuf in, out;
    int rc;

    if (args_parse(&tokenize_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&tokenize_spec), BANKML_OK;
    if ((rc = open_vocab("tokenize", a.pos[0], &v, NULL))) return rc;
    jbuf_init(&in);
    if (read_stdin("tokenize", &in)) {
        jbuf_free(&in);
        tok_free(v);
        return BANKML_EXIT_IO;
    }
    rc = tok_tokenize(v, in.p, in.len, 0, !args_opt(&a, "--no-special"), &ids, &n, err, sizeof err);
    jbuf_free(&in);
    tok_free(v);
    if (rc != 0) {
        fprintf(stderr, "bankml tokenize: %s\n", err);
        return BANKML_REFUSE;
    }
    jbuf_init(&out);
    jbuf_puts(&out, "{\"tokens\": [");
    for (size_t i = 0; i < n; i++)
        jbuf_printf(&out, i ? ",%d" : "%d", (int)ids[i]);
    jbuf_puts(&out, "]}\n");
    print_jbuf(stdout, &out);
    rc = out.oom ? BANKML_EXIT_IO : BANKML_OK;
    jbuf_free(&out);
    free(ids);
    return rc;
}

static const arg_opt detokenize_opts[] = {ARGS_HELP_ROW};
static const command_spec detokenize_spec = {
    "detokenize", "detokenize MODEL < ids.json", "the text of the ids on standard input, as llama-server's /detokenize", 1,
    0, ARGS_TABLE(detokenize_opts)};

/* As llama-server's /detokenize: each token's piece, specials included,
 * joined. Input: a JSON array of ids, or an object with "tokens". */
static int cmd_detokenize(int argc, char **argv)
{
    parsed_args a;
    tok_vocab *v;
    json_value *doc;
    const json_value *arr;
    char err[512];
    jbuf in, out;
    int rc = BANKML_OK;

    if (args_parse(&detokenize_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&detokenize_spec), BANKML_OK;
    if ((rc = open_vocab("detokenize", a.pos[0], &v, NULL))) return rc;
    jbuf_init(&in);
    if (read_stdin("detokenize", &in)) {
        jbuf_free(&in);
        tok_free(v);
        return BANKML_EXIT_IO;
    }
    doc = json_parse(in.p, in.len, err, sizeof err);
    jbuf_free(&in);
    if (!doc) {
        fprintf(stderr, "bankml detokenize: %s\n", err);
        tok_free(v);
        return BANKML_REFUSE;
    }
    arr = doc->type == JSON_OBJECT ? json_get(doc, "tokens") : doc;
    jbuf_init(&out);
    if (!arr || arr->type != JSON_ARRAY) {
        snprintf(err, sizeof err, "expected a JSON array of token ids, or an object with \"tokens\"");
        rc = BANKML_REFUSE;
    }
    for (size_t i = 0; rc == BANKML_OK && i < arr->n; i++) {
        int64_t id;
        if (!json_as_i64(arr->items[i], &id) || id < 0 || id >= tok_n_tokens(v)) {
            snprintf(err, sizeof err, "token %zu is not an id of this vocabulary (0 to %d)", i,
                     (int)tok_n_tokens(v) - 1);
            rc = BANKML_REFUSE;
            break;
        }
        tok_piece(v, (int32_t)id, 1, &out);
    }
    if (rc == BANKML_OK) print_jbuf(stdout, &out);
    else fprintf(stderr, "bankml detokenize: %s\n", err);
    if (out.oom) rc = BANKML_EXIT_IO;
    jbuf_free(&out);
    json_free(doc);
    tok_free(v);
    return rc;
}

static const arg_opt chat_template_opts[] = {
    ARGS_HELP_ROW,
    {"--template-file", NULL, "F", NULL, "the model's", "a Jinja template to use instead of the model's", ARG_OWN, NULL, NULL},
    {"--no-generation-prompt", NULL, NULL, NULL, "", "end without the assistant's turn opening", ARG_OWN, NULL, NULL},
};
static const command_spec chat_template_spec = {
    "chat-template", "chat-template MODEL [--template-file F] [--no-generation-prompt] < messages.json",
    "the prompt llama-server's /apply-template makes of the messages on standard input", 1, 0,
    ARGS_TABLE(chat_template_opts)};

/* Prints the prompt llama-server's /apply-template returns for the messages
 * on stdin: the model's own template (or --template-file, or llama-server's
 * ChatML fallback when the GGUF has none), with the vocabulary's BOS/EOS. */
static int cmd_chat_template(int argc, char **argv)
{
    parsed_args a;
    tok_vocab *v;
    gguf_report r;
    template_opts o;
    const char *file, *tmpl;
    size_t tmpl_len;
    char err[1024];
    jbuf in, out, tf, bos, eos;
    int rc;

    if (args_parse(&chat_template_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&chat_template_spec), BANKML_OK;
    if ((rc = open_vocab("chat-template", a.pos[0], &v, &r))) return rc;
    jbuf_init(&in);
    jbuf_init(&out);
    jbuf_init(&tf);
    jbuf_init(&bos);
    jbuf_init(&eos);
    file = args_opt(&a, "--template-file");
    tmpl = gguf_kv_str(gguf_kv_find(&r.header, "tokenizer.chat_template"), &tmpl_len);
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f || jbuf_read_stream(&tf, f) != 0) {
            fprintf(stderr, "bankml chat-template: cannot read %s: %s\n", file, strerror(errno));
            if (f) fclose(f);
            rc = BANKML_EXIT_IO;
            goto done;
        }
        fclose(f);
        tmpl = tf.p;
        tmpl_len = tf.len;
    } else if (!tmpl || tmpl_len == 0) {
        tmpl = template_chatml_fallback;
        tmpl_len = strlen(template_chatml_fallback);
    }
    if (read_stdin("chat-template", &in)) {
        rc = BANKML_EXIT_IO;
        goto done;
    }
    template_opts_init(&o);
    if (args_opt(&a, "--no-generation-prompt")) o.add_generation_prompt = 0;
    if (tok_bos(v) != TOK_NULL) tok_piece(v, tok_bos(v), 1, &bos);
    if (tok_eos(v) != TOK_NULL) tok_piece(v, tok_eos(v), 1, &eos);
    jbuf_put(&bos, "", 0);
    jbuf_put(&eos, "", 0);
    o.bos_token = bos.p;
    o.eos_token = eos.p;
    o.add_bos = tok_add_bos(v);
    o.add_eos = tok_add_eos(v);
    if (tf.oom || bos.oom || eos.oom ||
        template_render_request(tmpl, tmpl_len, in.p, in.len, &o, &out, err, sizeof err) != 0) {
        fprintf(stderr, "bankml chat-template: %s\n", tf.oom || bos.oom || eos.oom ? "out of memory" : err);
        rc = BANKML_REFUSE;
        goto done;
    }
    print_jbuf(stdout, &out);
    rc = out.oom ? BANKML_EXIT_IO : BANKML_OK;
done:
    jbuf_free(&in);
    jbuf_free(&out);
    jbuf_free(&tf);
    jbuf_free(&bos);
    jbuf_free(&eos);
    gguf_report_free(&r);
    tok_free(v);
    return rc;
}

static const arg_opt bench_opts[] = {
    ARGS_HELP_ROW,
    {"-p", NULL, "N", NULL, "512", "prompt tokens per prompt-processing run", ARG_OWN, NULL, NULL},
    {"-n", NULL, "N", NULL, "128", "tokens per generation run", ARG_OWN, NULL, NULL},
    {"-t", NULL, "N", NULL, "2", "threads", ARG_OWN, NULL, NULL},
    {"-r", NULL, "N", NULL, "5", "repetitions after one warm-up", ARG_OWN, NULL, NULL},
    {"-ctk --cache-type-k", NULL, "TYPE", NULL, "f16",
     "KV cache type for K, as llama-bench -ctk (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1); "
     "LLAMA_ATTN_ROT_DISABLE is read as llama.cpp reads it", ARG_OWN, NULL, NULL},
    {"-ctv --cache-type-v", NULL, "TYPE", NULL, "f16", "KV cache type for V, as -ctk (always flash attention, "
     "as llama-bench -fa 1)", ARG_OWN, NULL, NULL},
    {"--fork", NULL, "F.json", NULL, "models.FORK.json", "the pin file", ARG_OWN, NULL, NULL},
};
static const command_spec bench_spec = {
    "bench", "bench MODEL [-p N] [-n N] [-t N] [-r N] [-ctk TYPE] [-ctv TYPE] [--fork F.json]",
    "prompt and generation speed, as llama-bench measures them", 1, 0, ARGS_TABLE(bench_opts)};

/* Option name as an integer in [lo, hi], def when absent; -1 after
 * printing why when it is not one. */
static long int_opt(const command_spec *c, const parsed_args *a, const char *name, long def, long lo, long hi)
{
    long x;
    return args_long(c, name, args_opt(a, name), lo, hi, def, &x) ? -1 : x;
}

static void mean_sd(const double *x, int n, double *mean, double *sd)
{
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* The bench's cache types (-ctk / -ctv, llama-bench's names) into fo. 0,
 * or -1 after printing why. */
static int bench_cache_types(const parsed_args *a, fw_opts *fo)
{
    const char *flag[2] = {"--cache-type-k", "--cache-type-v"};
    int *dst[2] = {&fo->kv_type_k, &fo->kv_type_v};
    for (int i = 0; i < 2; i++) {
        const char *v = args_opt(a, flag[i]);
        kvq_type t = KVQ_F16;
        if (v && kvq_parse(v, &t)) {
            fprintf(stderr, "bankml bench: %s %s: Unsupported cache type (allowed: %s)\n", i ? "-ctv" : "-ctk", v,
                    kvq_names());
            return -1;
        }
        *dst[i] = (int)t;
    }
    const char *rd = getenv("LLAMA_ATTN_ROT_DISABLE");
    fo->kv_rot_off = rd && atoi(rd) != 0;
    return 0;
}

/* Like llama-bench: prompt processing (one batch of -p random tokens into an
 * empty cache) and text generation (-n single-token steps from an empty
 * cache), each -r times after one warm-up, on -t threads, over a cache of
 * the -ctk / -ctv types. The model passes the guard and the pin first, as
 * everywhere. */
static int cmd_bench(int argc, char **argv)
{
    parsed_args a;
    long p, n, t, r;
    const char *fork;
    bankml_verified *v = NULL;
    gguf_map map;
    gguf_header h;
    fw_weights *fw = NULL;
    fw_seq *m = NULL;
    fw_opts fo;
    char err[1024];
    int32_t *ids = NULL;
    double pp[64], tg[64], ppm = 0, pps = 0, tgm = 0, tgs = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int rc;

    if (args_parse(&bench_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&bench_spec), BANKML_OK;
    if ((p = int_opt(&bench_spec, &a, "-p", 512, 0, 1 << 20)) < 0 ||
        (n = int_opt(&bench_spec, &a, "-n", 128, 0, 1 << 20)) < 0 ||
        (t = int_opt(&bench_spec, &a, "-t", 2, 1, 256)) < 0 ||
        (r = int_opt(&bench_spec, &a, "-r", 5, 1, 64)) < 0)
        return BANKML_EXIT_IO;
    memset(&fo, 0, sizeof fo);
    if (bench_cache_types(&a, &fo)) return BANKML_EXIT_IO;
    fork = args_opt(&a, "--fork");
    rc = bankml_verify(a.pos[0], fork ? fork : "models.FORK.json", BANKML_ENGINE_MAINLINE, &v, err, sizeof err);
    if (rc != BANKML_OK) {
        fprintf(stderr, "bankml bench: refuse: %s\n", err);
        return rc;
    }
    bankml_verified_free(v);
    memset(&h, 0, sizeof h);
    if (gguf_map_open(a.pos[0], &map, err, sizeof err) != 0) {
        fprintf(stderr, "bankml bench: %s\n", err);
        return BANKML_EXIT_IO;
    }
    if (gguf_parse(map.p, map.len, &h, NULL, err, sizeof err) != GGUF_OK) {
        fprintf(stderr, "bankml bench: %s: %s\n", a.pos[0], err);
        rc = BANKML_REFUSE;
        goto done;
    }
    fo.llama_threads = (int)t;
    fo.n_threads = (int)t;
    if (fw_weights_open(&fw, &map, &h, &fo, err, sizeof err) != 0 ||
        fw_seq_new(&m, fw, (size_t)(p > n + 1 ? p : n + 1), err, sizeof err) != 0) {
        fprintf(stderr, "bankml bench: %s: %s\n", a.pos[0], err);
        rc = BANKML_REFUSE;
        goto done;
    }
    ids = malloc(sizeof *ids * (size_t)(p > 1 ? p : 1));
    if (!ids) {
        fprintf(stderr, "bankml bench: out of memory\n");
        rc = BANKML_EXIT_IO;
        goto done;
    }
    for (long i = 0; i < p; i++) {   /* splitmix64: the same random tokens every run */
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        ids[i] = (int32_t)((z ^ (z >> 31)) % fw_weights_hp(fw)->n_vocab);
    }
    for (long rep = -1; rep < r; rep++) {   /* rep -1 is the warm-up */
        double t0;
        if (p > 0) {
            fw_truncate(m, 0);
            t0 = (bk_mono_ns() * 1e-9);
            if (fw_eval(m, ids, (size_t)p, NULL, 0, err, sizeof err) != 0) goto eval_fail;
            if (rep >= 0) pp[rep] = p / ((bk_mono_ns() * 1e-9) - t0);
        }
        if (n > 0) {
            int32_t id = ids[0 % (p ? p : 1)];
            if (!p) id = 0;
            fw_truncate(m, 0);
            t0 = (bk_mono_ns() * 1e-9);
            for (long i = 0; i < n; i++)
                if (fw_decode(m, id, NULL, err, sizeof err) != 0) goto eval_fail;
            if (rep >= 0) tg[rep] = n / ((bk_mono_ns() * 1e-9) - t0);
        }
    }
    if (p > 0) {
        mean_sd(pp, (int)r, &ppm, &pps);
        printf("%s  pp%ld  %.2f ± %.2f t/s\n", a.pos[0], p, ppm, pps);
    }
    if (n > 0) {
        mean_sd(tg, (int)r, &tgm, &tgs);
        printf("%s  tg%ld  %.2f ± %.2f t/s\n", a.pos[0], n, tgm, tgs);
    }
    printf("{\"model\": ");
    {
        jbuf b;
        jbuf_init(&b);
        json_put_cstr(&b, a.pos[0]);
        print_jbuf(stdout, &b);
        jbuf_free(&b);
    }
    printf(", \"n_prompt\": %ld, \"n_gen\": %ld, \"threads\": %ld, \"reps\": %ld, "
           "\"type_k\": \"%s\", \"type_v\": \"%s\", "
           "\"pp_tps\": %.3f, \"pp_tps_sd\": %.3f, \"tg_tps\": %.3f, \"tg_tps_sd\": %.3f}\n",
           p, n, t, r, kvq_info_of((kvq_type)fo.kv_type_k)->name, kvq_info_of((kvq_type)fo.kv_type_v)->name, ppm, pps,
           tgm, tgs);
    rc = BANKML_OK;
    goto done;
eval_fail:
    fprintf(stderr, "bankml bench: %s\n", err);
    rc = BANKML_REFUSE;
done:
    free(ids);
    fw_seq_free(m);
    fw_weights_close(fw);
    gguf_header_free(&h);
    gguf_map_close(&map);
    return rc;
}

/* ---- create, version, help -------------------------------------------- */

static const arg_opt create_opts[] = {
    ARGS_HELP_ROW,
    {"-f", NULL, "Modelfile", NULL, "", "the Ollama Modelfile to read (required); its FROM names a model pinned in DIR",
     ARG_OWN, NULL, NULL},
    {"--registry", NULL, "DIR", NULL, ".", "the folder of *.FORK.json pins FROM is found in; NAME.MODEL.json is "
     "written there", ARG_OWN, NULL, NULL},
};
static const command_spec create_spec = {
    "create", "create NAME -f Modelfile [--registry DIR]",
    "a derived model from an Ollama Modelfile, as `ollama create` makes one", 1, 0, ARGS_TABLE(create_opts)};

/* `bankml create`: read by the one parser, then made by api/ollama_store.c. */
static int cmd_create(int argc, char **argv)
{
    parsed_args a;
    if (args_parse(&create_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&create_spec), BANKML_OK;
    const char *f = args_opt(&a, "-f"), *reg = args_opt(&a, "--registry");
    if (!f) {
        fprintf(stderr, "bankml create: -f Modelfile is required\n");
        args_usage(&create_spec);
        return BANKML_EXIT_IO;
    }
    char *v[] = {(char *)a.pos[0], "-f", (char *)f, "--registry", reg ? (char *)reg : "."};
    return ollama_cmd_create(5, v);
}

static const arg_opt usage_opts[] = {ARGS_HELP_ROW};
static const command_spec usage_spec = {
    "usage", "usage [PID ...]",
    "prints the machine's memory and cores and each process's RSS and CPU% sampled over 0.5 s, as JSON (default: "
    "bankml itself)", 0, 4, ARGS_TABLE(usage_opts)};

/* bankml usage [PID ...] (spec §1): /bankml/usage's object for the given
 * processes, each named "pid N" (none given: this one, named "bankml"). A
 * process that cannot be read is left out. */
static int cmd_usage(int argc, char **argv)
{
    long pids[64];
    char names[64][32];
    const char *np[64];
    size_t n = 0;
    for (int i = 0; i < argc; i++) {   /* every argument, before the parser's count of them */
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) return args_help(&usage_spec), BANKML_OK;
        char *end;
        errno = 0;
        long pid = strtol(s, &end, 10);
        if (!*s || *end || errno || pid <= 0 || pid > INT32_MAX) {
            fprintf(stderr, "bankml usage: not a process id: %s\n", s);
            return BANKML_EXIT_IO;
        }
        if (n == 64) {
            fprintf(stderr, "bankml usage: at most 64 processes\n");
            return BANKML_EXIT_IO;
        }
        pids[n] = pid;
        snprintf(names[n], sizeof names[n], "pid %ld", pid);
        np[n] = names[n];
        n++;
    }
    if (!n) {
        pids[0] = 0;
        np[0] = "bankml";
        n = 1;
    }
    jbuf b;
    jbuf_init(&b);
    int rc = status_usage_json(pids, np, n, 500, &b);
    jbuf_putc(&b, '\n');
    if (rc == 0 && !b.oom) print_jbuf(stdout, &b);
    jbuf_free(&b);
    return rc == 0 ? BANKML_OK : BANKML_EXIT_IO;
}

static const arg_opt version_opts[] = {ARGS_HELP_ROW};
static const command_spec version_spec = {"version", "version", "prints bankml's version (also --version, -V)", 0, 0,
                                          ARGS_TABLE(version_opts)};

static const arg_opt help_opts[] = {
    ARGS_HELP_ROW,
    {"--markdown", NULL, NULL, NULL, "", "the options (or archs' table) as a Markdown table, for the docs", ARG_OWN,
     NULL, NULL},
};
static const command_spec help_spec = {
    "help", "help [COMMAND|archs] [--markdown]",
    "every command's usage; with COMMAND its options, each with its default and meaning (as COMMAND --help); with "
    "archs the architectures that play", 0, 1, ARGS_TABLE(help_opts)};

/* ---- dispatch ----------------------------------------------------------- */

static const command_spec *const all_specs[] = {
    &guard_spec, &sha256_spec, &pin_spec, &verify_spec,
    &tokenize_spec, &detokenize_spec, &chat_template_spec, &bench_spec, &usage_spec,
};

/* Levenshtein distance of a and b (each under 64 bytes; longer: 99). */
static int main_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    int row[64], prev;
    if (n >= 64 || m >= 64) return 99;
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        prev = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int cur = row[j];
            int best = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[m];
}

/* The command nearest to s (a typo: at most 2 edits, fewer than s has
 * letters; or s begins it), or NULL. */
static const char *main_nearest_command(const char *s)
{
    static const char *const names[] = {"guard", "sha256", "pin", "verify", "tokenize", "detokenize",
                                        "chat-template", "bench", "usage", "generate", "serve", "create", "version", "help"};
    const char *best = NULL;
    int bd = 3;
    size_t sl = strlen(s);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int d = main_edit_distance(s, names[i]);
        if (sl >= 2 && !strncmp(names[i], s, sl) && d > 0) d = 1;
        if (d < bd && d < (int)sl) {
            bd = d;
            best = names[i];
        }
    }
    return best;
}

/* "unknown command X" with the nearest command when there is one. */
static void main_unknown_command(const char *who, const char *cmd)
{
    const char *near = main_nearest_command(cmd);
    if (near) fprintf(stderr, "%s: unknown command %s (did you mean bankml %s%s?)\n", who, cmd,
                      strcmp(who, "bankml help") ? "" : "help ", near);
    else fprintf(stderr, "%s: unknown command %s\n", who, cmd);
}

static const command_spec *find_spec(const char *name)
{
    for (size_t i = 0; i < sizeof all_specs / sizeof all_specs[0]; i++)
        if (!strcmp(all_specs[i]->name, name)) return all_specs[i];
    if (!strcmp(name, "generate")) return &generate_spec;
    if (!strcmp(name, "serve")) return &serve_spec;
    if (!strcmp(name, "create")) return &create_spec;
    if (!strcmp(name, "version")) return &version_spec;
    if (!strcmp(name, "help")) return &help_spec;
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "bankml %s: a local LLM server that trusts nothing\n"
               "usage:\n", BANKML_VERSION);
    for (size_t i = 0; i < sizeof all_specs / sizeof all_specs[0]; i++)
        fprintf(f, "  bankml %s\n", all_specs[i]->usage);
    fprintf(f, "  bankml %s\n  bankml %s\n  bankml %s\n  bankml %s\n", generate_spec.usage, serve_spec.usage,
            create_spec.usage, version_spec.usage);
    fprintf(f,
               "  bankml help [COMMAND]   (or bankml COMMAND --help: every option, its default and meaning)\n"
               "  bankml help archs [--markdown]   (the architectures that play)\n"
               "exit codes: 0 play/ok, 2 refuse, 3 need more header bytes, 1 usage or I/O\n");
}

/* The tensors of a beyond those of base (by name), with "(optional)" or
 * "(tied: may be absent)", comma-separated into buf. */
static void archs_extra(const fw_arch *a, const fw_arch *base, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int top = 1; top >= 0; top--) {
        const fw_tensor_desc *d = top ? a->top : a->layer;
        size_t cnt = top ? a->n_top : a->n_layer;
        for (size_t i = 0; i < cnt && n < len; i++) {
            if (a != base && (top ? fw_arch_top_tensor(base, d[i].name)
                                  : fw_arch_layer_tensor(base, d[i].name)))
                continue;
            if (a == base && d[i].presence == FW_REQUIRED) continue;
            int w = snprintf(buf + n, len - n, "%s`%s%s`%s", n ? ", " : "", top ? "" : "blk.N.",
                             d[i].name,
                             d[i].presence == FW_OPTIONAL ? " (optional)"
                             : d[i].presence == FW_TIED   ? " (absent: tied to token_embd)" : "");
            if (w < 0) return;
            n += (size_t)w;
        }
    }
    if (!n) snprintf(buf, len, "-");
}

/* `bankml help archs [--markdown]`: the architecture table (src/graph/arch.c)
 * as README's table of what plays. */
static int archs_print(int markdown)
{
    const fw_arch *base = fw_arch_find("llama", 5);
    char extra[1024];
    if (markdown)
        printf("| `general.architecture` | models | RoPE | per-head Q/K norms | tensors beyond llama's "
               "(llama: its optional ones) |\n|---|---|---|---|---|\n");
    else
        printf("architectures the forward pass plays (src/graph/arch.c):\n");
    for (size_t i = 0; i < fw_arch_count(); i++) {
        const fw_arch *a = fw_arch_at(i);
        archs_extra(a, base, extra, sizeof extra);
        if (markdown)
            printf("| `%s` | %s | %s | %s | %s |\n", a->name, a->models,
                   a->rope_neox ? "NeoX (halves)" : "pairs", a->qk_norm ? "yes" : "no", extra);
        else
            printf("  %-6s %s; RoPE %s%s; tensors: %s\n", a->name, a->models,
                   a->rope_neox ? "NeoX" : "pairs", a->qk_norm ? ", Q/K norms" : "", extra);
    }
    return BANKML_OK;
}

/* `bankml help [COMMAND] [--markdown]`. */
static int cmd_help(int argc, char **argv)
{
    const command_spec *c;
    parsed_args a;
    if (args_parse(&help_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&help_spec), BANKML_OK;
    int markdown = args_opt(&a, "--markdown") != NULL;
    if (a.n_pos == 0) {
        if (markdown) {
            fprintf(stderr, "bankml help: --markdown needs a COMMAND (or archs)\n");
            args_usage(&help_spec);
            return BANKML_EXIT_IO;
        }
        usage(stdout);
        return BANKML_OK;
    }
    if (!strcmp(a.pos[0], "archs")) return archs_print(markdown);
    if (!(c = find_spec(a.pos[0]))) {
        main_unknown_command("bankml help", a.pos[0]);
        usage(stderr);
        return BANKML_EXIT_IO;
    }
    if (markdown) args_help_markdown(c);
    else args_help(c);
    return BANKML_OK;
}

/* `bankml version` (also --version, -V). */
static int cmd_version(int argc, char **argv)
{
    parsed_args a;
    if (args_parse(&version_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&version_spec), BANKML_OK;
    printf("bankml %s\n", BANKML_VERSION);
    return BANKML_OK;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;
    int rest = argc > 2 ? argc - 2 : 0;
    char **args = argv + 2;

    if (!cmd) {
        usage(stderr);
        return BANKML_EXIT_IO;
    }
    if (!strcmp(cmd, "guard")) return cmd_guard(rest, args);
    if (!strcmp(cmd, "sha256")) return cmd_sha256(rest, args);
    /* progress lines (base/progress.h) for the commands that hash, load or prefill, on a terminal only */
    if (!strcmp(cmd, "pin") || !strcmp(cmd, "verify") || !strcmp(cmd, "serve") || !strcmp(cmd, "generate"))
        bk_progress_enable(1);
    if (!strcmp(cmd, "pin")) return cmd_pin(rest, args);
    if (!strcmp(cmd, "verify")) return cmd_verify(rest, args);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(rest, args);
    if (!strcmp(cmd, "detokenize")) return cmd_detokenize(rest, args);
    if (!strcmp(cmd, "chat-template")) return cmd_chat_template(rest, args);
    if (!strcmp(cmd, "bench")) return cmd_bench(rest, args);
    if (!strcmp(cmd, "usage")) return cmd_usage(rest, args);
    if (!strcmp(cmd, "generate")) return cmd_generate(rest, args);
    if (!strcmp(cmd, "serve")) return cmd_serve(rest, args);
    if (!strcmp(cmd, "create")) return cmd_create(rest, args);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version") || !strcmp(cmd, "-V")) return cmd_version(rest, args);
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) return cmd_help(rest, args);
    main_unknown_command("bankml", cmd);
    usage(stderr);
    return BANKML_EXIT_IO;
}
