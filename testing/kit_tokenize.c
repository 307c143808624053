/*
 * kit_tokenize.c -- the llama.cpp side of the tokenizer oracle.
 *
 * Loads a vocabulary-only GGUF once through the oracle kit's libllama.so
 * (llama.cpp b11669) and answers a stream of requests on stdin, so the fuzz
 * suite (testing/oracle_tokenizer.py) can compare thousands of strings in
 * about a second instead of starting llama-tokenize per string. Its twin,
 * testing/tokenizer_driver.c, speaks the same protocol over bankml's
 * tokenizer (src/text/tokenizer*.c).
 *
 * Usage: kit_tokenize VOCAB.gguf MODE < requests > answers
 *   MODE tok:   each request is a line "P A N" (parse_special 0/1,
 *               add_special 0/1, byte count) then N raw bytes and one '\n';
 *               the answer is one line of space-separated ids.
 *   MODE detok: each request is a line "R U K" (remove_special,
 *               unparse_special, count) then a line of K ids; the answer is
 *               the text as lowercase hex on one line ("-" when empty).
 *   MODE info:  no input; prints the special ids and flags, then one line
 *               per token "id attr eog piece_special_hex piece_plain_hex".
 *
 * Build (the kit's libraries need a newer glibc than the build machine's,
 * so leave their undefined symbols to the kit's loader) and run:
 *   K=/root/.cache/bankml-oracle/root/usr
 *   gcc -O2 -I$K/include -o /tmp/kit_tokenize testing/kit_tokenize.c \
 *       -L$K/lib/x86_64-linux-gnu -lllama -Wl,--allow-shlib-undefined
 *   /root/.cache/bankml-oracle/bin/sid-run /tmp/kit_tokenize V.gguf tok < req
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *ud) {
    (void)level; (void)text; (void)ud;
}

static void put_hex(const char *s, size_t n) {
    if (n == 0) { fputc('-', stdout); return; }
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

/* The piece of one token; grows the buffer when llama says it is short. */
static int piece(const struct llama_vocab *v, llama_token t, int special, char **buf, size_t *cap) {
    int n = llama_token_to_piece(v, t, *buf, (int32_t)*cap, 0, special);
    if (n < 0) {
        *cap = (size_t)-n + 16;
        *buf = realloc(*buf, *cap);
        if (!*buf) exit(3);
        n = llama_token_to_piece(v, t, *buf, (int32_t)*cap, 0, special);
    }
    return n;
}

static int do_info(const struct llama_vocab *v) {
    int n = llama_vocab_n_tokens(v);
    printf("n_tokens %d\ntype %d\n", n, (int)llama_vocab_type(v));
    printf("bos %d\neos %d\neot %d\nsep %d\nnl %d\npad %d\nmask %d\n",
           llama_vocab_bos(v), llama_vocab_eos(v), llama_vocab_eot(v), llama_vocab_sep(v),
           llama_vocab_nl(v), llama_vocab_pad(v), llama_vocab_mask(v));
    printf("fim_pre %d\nfim_suf %d\nfim_mid %d\nfim_pad %d\nfim_rep %d\nfim_sep %d\n",
           llama_vocab_fim_pre(v), llama_vocab_fim_suf(v), llama_vocab_fim_mid(v),
           llama_vocab_fim_pad(v), llama_vocab_fim_rep(v), llama_vocab_fim_sep(v));
    printf("add_bos %d\nadd_eos %d\n", (int)llama_vocab_get_add_bos(v), (int)llama_vocab_get_add_eos(v));
    size_t cap = 256;
    char *buf = malloc(cap);
    if (!buf) return 3;
    for (int t = 0; t < n; t++) {
        printf("%d %d %d ", t, (int)llama_vocab_get_attr(v, t), (int)llama_vocab_is_eog(v, t));
        int k = piece(v, t, 1, &buf, &cap);
        put_hex(buf, k > 0 ? (size_t)k : 0);
        fputc(' ', stdout);
        k = piece(v, t, 0, &buf, &cap);
        put_hex(buf, k > 0 ? (size_t)k : 0);
        fputc('\n', stdout);
    }
    free(buf);
    return 0;
}

static int do_tok(const struct llama_vocab *v) {
    int p, a;
    size_t len;
    int32_t *ids = NULL;
    size_t idcap = 0;
    while (scanf("%d %d %zu", &p, &a, &len) == 3) {
        if (getchar() != '\n') return 2;
        char *text = malloc(len + 1);
        if (!text) return 3;
        if (fread(text, 1, len, stdin) != len) return 2;
        if (getchar() != '\n') return 2;
        size_t need = len * 2 + 16;
        if (need > idcap) {
            idcap = need;
            ids = realloc(ids, idcap * sizeof *ids);
            if (!ids) return 3;
        }
        int32_t n = llama_tokenize(v, text, (int32_t)len, ids, (int32_t)idcap, a, p);
        if (n < 0) {
            idcap = (size_t)-n;
            ids = realloc(ids, idcap * sizeof *ids);
            if (!ids) return 3;
            n = llama_tokenize(v, text, (int32_t)len, ids, (int32_t)idcap, a, p);
        }
        if (n < 0) { printf("ERR %d\n", n); }
        else {
            for (int32_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
            fputc('\n', stdout);
        }
        free(text);
    }
    free(ids);
    return 0;
}

static int do_detok(const struct llama_vocab *v) {
    int r, u;
    size_t k;
    while (scanf("%d %d %zu", &r, &u, &k) == 3) {
        int32_t *ids = malloc((k + 1) * sizeof *ids);
        if (!ids) return 3;
        for (size_t i = 0; i < k; i++)
            if (scanf("%d", &ids[i]) != 1) return 2;
        size_t cap = 64 + k * 16;
        char *out = malloc(cap);
        if (!out) return 3;
        int32_t n = llama_detokenize(v, ids, (int32_t)k, out, (int32_t)cap, r, u);
        if (n < 0) {
            cap = (size_t)-n;
            out = realloc(out, cap);
            if (!out) return 3;
            n = llama_detokenize(v, ids, (int32_t)k, out, (int32_t)cap, r, u);
        }
        put_hex(out, n > 0 ? (size_t)n : 0);
        fputc('\n', stdout);
        free(out);
        free(ids);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: kit_tokenize VOCAB.gguf tok|detok|info\n");
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) {
        printf("LOADERR\n");
        return 1;
    }
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int rc;
    if (strcmp(argv[2], "info") == 0) rc = do_info(v);
    else if (strcmp(argv[2], "tok") == 0) rc = do_tok(v);
    else if (strcmp(argv[2], "detok") == 0) rc = do_detok(v);
    else rc = 2;
    fflush(stdout);
    llama_model_free(m);
    return rc;
}
