/*
 * generate.c -- `bankml generate MODEL`: one answer to the conversation (or
 * text) on standard input, through the engine as the server runs it.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bankml.h"
#include "base/json.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "engine/engine.h"

/* The sampling flags and the llama-server fields they set. */
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
#define N_FLAG_KEYS (sizeof flag_keys / sizeof flag_keys[0])

static const arg_opt generate_opts[] = {
    ARGS_HELP_ROW,
    {"--max", NULL, "N", NULL, "256", "tokens to generate at most", ARG_OWN, NULL, NULL},
    {"--json", NULL, NULL, NULL, "", "print the answer as one JSON object (content, token counts, finish reason)", ARG_OWN, NULL, NULL},
    {"--sample", NULL, NULL, NULL, "", "sample with llama-server's chain (default: greedy argmax)", ARG_OWN, NULL, NULL},
    {"--swa-full", NULL, NULL, NULL, "", "as llama-server --swa-full: a sliding-window model (gemma3) plays only with it", ARG_OWN, NULL, NULL},
    {"--fork", NULL, "F", NULL, "models.FORK.json", "the pin file", ARG_OWN, NULL, NULL},
    {"--temp", NULL, "T", NULL, "0.8", "temperature (with --sample)", ARG_OWN, NULL, NULL},
    {"--top-k", NULL, "K", NULL, "40", "top-k", ARG_OWN, NULL, NULL},
    {"--top-p", NULL, "P", NULL, "0.95", "top-p", ARG_OWN, NULL, NULL},
    {"--min-p", NULL, "P", NULL, "0.05", "min-p", ARG_OWN, NULL, NULL},
    {"--seed", NULL, "S", NULL, "random", "the sampler's seed", ARG_OWN, NULL, NULL},
    {"--typical-p", NULL, "P", NULL, "1.0", "locally typical p", ARG_OWN, NULL, NULL},
    {"--top-n-sigma", NULL, "S", NULL, "-1", "top-n-sigma", ARG_OWN, NULL, NULL},
    {"--xtc-probability", NULL, "P", NULL, "0", "XTC probability", ARG_OWN, NULL, NULL},
    {"--xtc-threshold", NULL, "T", NULL, "0.1", "XTC threshold", ARG_OWN, NULL, NULL},
    {"--dynatemp-range", NULL, "R", NULL, "0", "dynamic temperature range", ARG_OWN, NULL, NULL},
    {"--dynatemp-exponent", NULL, "E", NULL, "1", "dynamic temperature exponent", ARG_OWN, NULL, NULL},
    {"--repeat-last-n", NULL, "N", NULL, "64", "repeat-penalty window", ARG_OWN, NULL, NULL},
    {"--repeat-penalty", NULL, "P", NULL, "1.0", "repeat penalty", ARG_OWN, NULL, NULL},
    {"--frequency-penalty", NULL, "P", NULL, "0", "frequency penalty", ARG_OWN, NULL, NULL},
    {"--presence-penalty", NULL, "P", NULL, "0", "presence penalty", ARG_OWN, NULL, NULL},
    {"--dry-multiplier", NULL, "M", NULL, "0", "DRY multiplier", ARG_OWN, NULL, NULL},
    {"--dry-base", NULL, "B", NULL, "1.75", "DRY base", ARG_OWN, NULL, NULL},
    {"--dry-allowed-length", NULL, "N", NULL, "2", "DRY allowed length", ARG_OWN, NULL, NULL},
    {"--dry-penalty-last-n", NULL, "N", NULL, "64", "DRY window", ARG_OWN, NULL, NULL},
    {"--min-keep", NULL, "N", NULL, "0", "candidates every sampler keeps", ARG_OWN, NULL, NULL},
};

const command_spec generate_spec = {
    "generate",
    "generate MODEL [--max N] [--json] [--sample [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] "
    "[--typical-p P] [--top-n-sigma S] [--xtc-probability P] [--xtc-threshold T] [--dynatemp-range R] "
    "[--dynatemp-exponent E] [--repeat-last-n N] [--repeat-penalty P] [--frequency-penalty P] "
    "[--presence-penalty P] [--dry-multiplier M] [--dry-base B] [--dry-allowed-length N] "
    "[--dry-penalty-last-n N] [--min-keep N]] [--fork F] < messages.json|text",
    "one answer to the conversation (or text) on standard input, through the engine as the server runs it; "
    "sampling values are read as the server reads their request fields",
    1, 0, ARGS_TABLE(generate_opts)};

/* The sampling flags over the GGUF's defaults, with llama-server's rules and
 * refusals (sampler_resolve reads them as the fields they name). Each
 * value is read as a JSON number, as the server reads a field. 0, 1 after
 * a flag that is not a number, 2 after a refusal. */
static int read_sampling(const parsed_args *a, const sampler_params *defaults, sampler_params *sp)
{
    json_value *obj = json_new(JSON_OBJECT, NULL, 0);
    char err[512];
    int rc = obj ? 0 : 1;
    if (!obj) fprintf(stderr, "bankml generate: out of memory\n");
    for (size_t k = 0; k < N_FLAG_KEYS && !rc; k++) {
        const char *v = args_opt(a, flag_keys[k][0]);
        if (!v) continue;
        json_value *num = json_new(JSON_NUMBER, v, strlen(v));
        if (!num) {
            fprintf(stderr, "bankml generate: %s wants a number, not %s\n", flag_keys[k][0], v);
            rc = 1;
        } else if (json_add(obj, flag_keys[k][1], num) != 0) {
            fprintf(stderr, "bankml generate: out of memory\n");
            rc = 1;
        }
    }
    if (!rc && sampler_resolve(sp, defaults, obj, err, sizeof err) != 0) {
        fprintf(stderr, "bankml generate: %s\n", err);
        rc = 2;
    }
    json_free(obj);
    return rc;
}

/* Standard input as a conversation: a JSON array of messages, an object
 * with "messages", or plain text (one user turn). *own is what to free. */
static const json_value *read_messages(const jbuf *in, json_value **doc, json_value **own)
{
    char err[256];
    size_t k = 0;
    while (k < in->len && isspace((unsigned char)in->p[k])) k++;
    if (k < in->len && (in->p[k] == '[' || in->p[k] == '{')) *doc = json_parse(in->p, in->len, err, sizeof err);
    const json_value *msgs = *doc ? ((*doc)->type == JSON_OBJECT ? json_get(*doc, "messages") : *doc) : NULL;
    if (msgs) return msgs;
    jbuf t;
    jbuf_init(&t);
    jbuf_puts(&t, "[{\"role\": \"user\", \"content\": ");
    json_put_str(&t, in->p ? in->p : "", in->len);
    jbuf_puts(&t, "}]");
    *own = json_parse(t.p, t.len, err, sizeof err);
    jbuf_free(&t);
    return *own;
}

static int print_token(void *ud, const engine_token *t, int stop_now, const engine_result *so_far)
{
    (void)stop_now;
    (void)so_far;
    if (!ud && t->text_len) {
        fwrite(t->text, 1, t->text_len, stdout);
        fflush(stdout);
    }
    return 0;
}

static void print_answer(const engine_result *res, size_t n_prompt, int json_out)
{
    if (json_out) {
        jbuf o;
        jbuf_init(&o);
        jbuf_puts(&o, "{\"content\": ");
        json_put_str_nl(&o, res->text.p ? res->text.p : "", res->text.len);
        jbuf_printf(&o, ", \"prompt_tokens\": %zu, \"completion_tokens\": %zu, \"finish_reason\": \"%s\"}\n", n_prompt,
                    res->n_decoded, engine_finish(res));
        fwrite(o.p, 1, o.len, stdout);
        jbuf_free(&o);
        return;
    }
    /* bytes still held back as incomplete UTF-8 at the end */
    if (res->n_sent < res->text.len) fwrite(res->text.p + res->n_sent, 1, res->text.len - res->n_sent, stdout);
    fputc('\n', stdout);
}

/* The prompt's tokens, the request and the answer, with the model held. */
static int generate(engine *e, engine_model *m, const parsed_args *a, long max, int json_out)
{
    char err[1024];
    int rc = BANKML_REFUSE;
    jbuf in, prompt;
    json_value *doc = NULL, *own = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    engine_request rq;
    engine_result res;
    engine_error er = {0};
    engine_request_init(&rq);
    memset(&res, 0, sizeof res);
    jbuf_init(&in);
    jbuf_init(&prompt);
    if (jbuf_read_stream(&in, stdin) != 0) {
        fprintf(stderr, "bankml generate: cannot read standard input: %s\n", strerror(errno));
        goto out;
    }
    const json_value *msgs = read_messages(&in, &doc, &own);
    if (!msgs || engine_render(m, msgs, &prompt, err, sizeof err) != 0 ||
        engine_tokenize(m, prompt.p ? prompt.p : "", prompt.len, &ids, &n_ids, err, sizeof err) != 0) {
        fprintf(stderr, "bankml generate: %s\n", msgs ? err : "out of memory");
        goto out;
    }
    if (n_ids >= engine_model_n_ctx(m)) {
        fprintf(stderr, "bankml generate: the prompt has %zu tokens; the context is %zu\n", n_ids,
                engine_model_n_ctx(m));
        goto out;
    }
    rq.greedy = !args_opt(a, "--sample");
    sampler_params_free(&rq.sp);   /* engine_request_init's defaults: replaced by the model's */
    if (rq.greedy) {
        if (sampler_params_copy(&rq.sp, engine_model_defaults(m)) != 0) {
            fprintf(stderr, "bankml generate: out of memory\n");
            goto out;
        }
    } else {
        int r = read_sampling(a, engine_model_defaults(m), &rq.sp);
        if (r) {
            rc = r == 1 ? BANKML_EXIT_IO : BANKML_REFUSE;
            goto out;
        }
    }
    rq.prompt = ids;
    rq.n_prompt = max == 0 ? 0 : n_ids;   /* the CLI's --max 0 asks for nothing */
    rq.n_predict = (int32_t)(max > INT32_MAX ? INT32_MAX : max);
    engine_sink sink = {print_token, NULL, json_out ? (void *)1 : NULL, NULL};
    if (engine_complete(e, m, &rq, &sink, &res, &er) != 0) {
        fprintf(stderr, "bankml generate: %s\n", er.msg);
        rc = BANKML_EXIT_IO;
        goto out;
    }
    print_answer(&res, n_ids, json_out);
    rc = BANKML_OK;
out:
    engine_result_free(&res);
    engine_request_free(&rq);
    free(ids);
    json_free(doc);
    json_free(own);
    jbuf_free(&in);
    jbuf_free(&prompt);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    parsed_args a;
    const char *fork, *v;
    long max = 256;
    engine_error er = {0};
    if (args_parse(&generate_spec, argc, argv, &a)) return BANKML_EXIT_IO;
    if (a.help) return args_help(&generate_spec), BANKML_OK;
    fork = args_opt(&a, "--fork");
    if (!fork) fork = "models.FORK.json";
    if ((v = args_opt(&a, "--max"))) {
        char *end;
        max = strtol(v, &end, 10);
        if (*end || max < 0) {
            fprintf(stderr, "bankml generate: --max wants a count, not %s\n", v);
            return BANKML_EXIT_IO;
        }
    }
    engine_opts o = {.n_ctx = 4096, .llama_threads = 2, .swa_full = args_bool(&a, "--swa-full", 0)};
    engine *e = engine_new(&o, &er);
    if (!e || engine_add(e, a.pos[0], a.pos[0], fork, 1) != 0) {
        fprintf(stderr, "bankml generate: %s\n", e ? "out of memory" : er.msg);
        engine_free(e);
        return BANKML_EXIT_IO;
    }
    engine_model *m = engine_acquire(e, 0, NULL, &er);
    if (!m) {
        fprintf(stderr, "bankml generate: %s\n", er.msg);
        engine_free(e);
        return er.kind == ENGINE_INTERNAL ? BANKML_EXIT_IO : BANKML_REFUSE;
    }
    int rc = generate(e, m, &a, max, args_opt(&a, "--json") != NULL);
    engine_release(e, -1);
    engine_free(e);
    return rc;
}
