/*
 * kit_llama_dump.c -- runs a whole model in llama.cpp b11669's libllama and writes every intermediate
 * tensor of its graph (or those whose names start with given prefixes) as raw bits, step by step, so a
 * bankml test can find the first layer and the first operation where its forward pass leaves llama.cpp's.
 *
 * Why not llama-eval-callback: it prints 3 numbers per edge with 4 decimals and a sum; a one-ulp
 * difference does not show. This program uses the same hook (cb_eval) and writes the bytes.
 *
 * Usage: sid-run build/kit-llama-dump [-t THREADS] [-n STEPS] [-fa on|off|auto] [-c CTX]
 *                                     MODEL TOKENS.i32 OUTDIR [NAME_PREFIX...]
 *
 *   TOKENS.i32   the prompt as little-endian int32 token ids, decoded as one batch (step 0)
 *   -n STEPS     then STEPS single-token decodes, each of the argmax of the last logits (default 0)
 *   -t THREADS   threads for both batch and single-token decoding (default 2, as llama-server -t 2)
 *   -fa          flash attention (default auto, as llama-server)
 *   -c CTX       context size (default 512)
 *
 * Writes OUTDIR/step<k>/NNNN-<name>.bin (the tensor's bytes in its own type, contiguous tensors only),
 * OUTDIR/step<k>/index.txt ("NNNN name type ne0 ne1 ne2 ne3 op" per line; non-contiguous tensors are
 * listed with "-" as their file) and OUTDIR/step<k>/logits.f32 (the last position's logits). Exit status
 * 0 on success, 2 on an error (one line on stderr).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

typedef struct {
    char dir[4096];
    char **prefixes;
    int n_prefixes;
    int seq;
    FILE *index;
    int failed;
} Dump;

static int wanted(const Dump *d, const char *name) {
    if (d->n_prefixes == 0)
        return 1;
    for (int i = 0; i < d->n_prefixes; i++)
        if (strncmp(name, d->prefixes[i], strlen(d->prefixes[i])) == 0)
            return 1;
    return 0;
}

/* File names keep letters, digits, '-', '_' and '.'; the rest (spaces, parentheses) become '_'. */
static void safe_name(char *out, size_t cap, const char *name) {
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                 c == '_' || c == '.';
        out[i] = ok ? c : '_';
    }
    out[i] = 0;
}

/* The scheduler asks (ask = true) whether we want a tensor, then calls again once it is computed. */
static bool on_tensor(struct ggml_tensor *t, bool ask, void *user) {
    Dump *d = user;
    if (ask)
        return wanted(d, t->name);
    int seq = d->seq++;
    char fname[256] = "-";
    if (ggml_is_contiguous(t)) {
        char sn[200], path[4600];
        safe_name(sn, sizeof sn, t->name);
        snprintf(fname, sizeof fname, "%04d-%s.bin", seq, sn);
        snprintf(path, sizeof path, "%s/%s", d->dir, fname);
        size_t n = ggml_nbytes(t);
        void *buf = malloc(n ? n : 1);
        FILE *f = fopen(path, "wb");
        if (!buf || !f || (n && (ggml_backend_tensor_get(t, buf, 0, n), fwrite(buf, 1, n, f) != n)))
            d->failed = 1;
        if (f && fclose(f) != 0)
            d->failed = 1;
        free(buf);
    }
    fprintf(d->index, "%04d %s %s %lld %lld %lld %lld %s %s\n", seq, t->name, ggml_type_name(t->type),
            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], ggml_op_desc(t),
            fname);
    return true;
}

static int begin_step(Dump *d, const char *outdir, int step) {
    snprintf(d->dir, sizeof d->dir, "%s/step%d", outdir, step);
    if (mkdir(d->dir, 0755) != 0 && errno != EEXIST)
        return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/index.txt", d->dir);
    d->index = fopen(path, "w");
    d->seq = 0;
    return d->index ? 0 : -1;
}

static int end_step(Dump *d, const float *logits, int n_vocab) {
    char path[4200];
    int rc = fclose(d->index) == 0 ? 0 : -1;
    d->index = NULL;
    snprintf(path, sizeof path, "%s/logits.f32", d->dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(logits, sizeof(float), (size_t)n_vocab, f) != (size_t)n_vocab)
        rc = -1;
    if (f && fclose(f) != 0)
        rc = -1;
    return rc || d->failed ? -1 : 0;
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

static int die(const char *msg, const char *arg) {
    fprintf(stderr, "kit-llama-dump: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

int main(int argc, char **argv) {
    int threads = 2, steps = 0, ctx = 512;
    enum llama_flash_attn_type fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
    int a = 1;
    for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
        if (strcmp(argv[a], "-t") == 0)
            threads = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "-n") == 0)
            steps = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "-c") == 0)
            ctx = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "-fa") == 0)
            fa = strcmp(argv[a + 1], "on") == 0    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                 : strcmp(argv[a + 1], "off") == 0 ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                   : LLAMA_FLASH_ATTN_TYPE_AUTO;
        else
            return die("unknown option", argv[a]);
    }
    if (argc - a < 3 || threads < 1 || steps < 0 || ctx < 8) {
        fprintf(stderr, "usage: sid-run kit-llama-dump [-t N] [-n STEPS] [-fa on|off|auto] [-c CTX] "
                        "MODEL TOKENS.i32 OUTDIR [NAME_PREFIX...]\n");
        return 2;
    }
    const char *model_path = argv[a], *tok_path = argv[a + 1], *outdir = argv[a + 2];
    Dump d;
    memset(&d, 0, sizeof d);
    d.prefixes = argv + a + 3;
    d.n_prefixes = argc - a - 3;

    FILE *f = fopen(tok_path, "rb");
    if (!f)
        return die(strerror(errno), tok_path);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(ctx + 1));
    size_t n_tok = tokens ? fread(tokens, sizeof(int32_t), (size_t)ctx, f) : 0;
    fclose(f);
    if (n_tok == 0 || (int)n_tok + steps > ctx)
        return die("the prompt is empty or does not fit the context with the steps", tok_path);
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
        return die(strerror(errno), outdir);

    llama_log_set(quiet, NULL);
    ggml_backend_load_all(); /* the CPU backend named by GGML_BACKEND_PATH (sid-run sets it) */
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model)
        return die("cannot load the model", model_path);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)ctx;
    cp.n_batch = cp.n_ubatch = (uint32_t)(n_tok > 512 ? n_tok : 512);
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = fa;
    cp.cb_eval = on_tensor;
    cp.cb_eval_user_data = &d;
    struct llama_context *lctx = llama_init_from_model(model, cp);
    if (!lctx)
        return die("cannot create a context", NULL);
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    int rc = 0;
    int32_t next = 0;
    for (int step = 0; step <= steps && rc == 0; step++) {
        if (begin_step(&d, outdir, step))
            return die("cannot write into", d.dir);
        struct llama_batch b = step == 0 ? llama_batch_get_one(tokens, (int32_t)n_tok) : llama_batch_get_one(&next, 1);
        if (llama_decode(lctx, b) != 0)
            return die("llama_decode failed", NULL);
        const float *logits = llama_get_logits_ith(lctx, -1);
        if (!logits || end_step(&d, logits, n_vocab))
            return die("cannot write the dump of", d.dir);
        next = 0;
        for (int i = 1; i < n_vocab; i++)
            if (logits[i] > logits[next])
                next = i;
    }
    llama_free(lctx);
    llama_model_free(model);
    free(tokens);
    return rc;
}
