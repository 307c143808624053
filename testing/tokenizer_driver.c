/*
 * tokenizer_driver.c -- bankml's side of the tokenizer oracle.
 *
 * Speaks the protocol of testing/kit_tokenize.c (llama.cpp's side) over
 * bankml's tokenizer (tokenizer.h, src/text/tokenizer*.c), so
 * testing/oracle_tokenizer.py can feed both the same
 * requests and compare the answers line by line.
 *
 * Usage: tokenizer_driver VOCAB.gguf tok|detok|info < requests > answers
 * (see kit_tokenize.c for the request and answer formats). A vocabulary
 * bankml refuses prints "LOADERR <reason>" and exits 1.
 *
 * Build (with every .c file of src/text, as testing/oracle_tokenizer.py does):
 *   gcc -std=gnu11 -D_GNU_SOURCE -Isrc -Iinclude -O2 -o /tmp/tokenizer_driver \
 *       testing/tokenizer_driver.c src/text/EACH.c src/file/gguf.c src/base/json.c \
 *       src/base/base.c -lm
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

static void put_hex(const char *s, size_t n)
{
    size_t i;
    if (n == 0) { fputc('-', stdout); return; }
    for (i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

static int do_info(const tok_vocab *v)
{
    int32_t n = tok_n_tokens(v), t;
    jbuf b;
    printf("n_tokens %d\ntype %d\n", n, tok_type(v));
    printf("bos %d\neos %d\neot %d\nsep %d\nnl %d\npad %d\nmask %d\n", tok_bos(v), tok_eos(v),
           tok_eot(v), tok_sep(v), tok_nl(v), tok_pad(v), tok_mask(v));
    printf("fim_pre %d\nfim_suf %d\nfim_mid %d\nfim_pad %d\nfim_rep %d\nfim_sep %d\n",
           tok_fim_pre(v), tok_fim_suf(v), tok_fim_mid(v), tok_fim_pad(v), tok_fim_rep(v),
           tok_fim_sep(v));
    printf("add_bos %d\nadd_eos %d\n", tok_add_bos(v), tok_add_eos(v));
    jbuf_init(&b);
    for (t = 0; t < n; t++) {
        printf("%d %u %d ", t, tok_attr(v, t), tok_is_eog(v, t));
        jbuf_reset(&b);
        tok_piece(v, t, 1, &b);
        put_hex(b.p, b.len);
        fputc(' ', stdout);
        jbuf_reset(&b);
        tok_piece(v, t, 0, &b);
        put_hex(b.p, b.len);
        fputc('\n', stdout);
    }
    jbuf_free(&b);
    return 0;
}

static int do_tok(const tok_vocab *v)
{
    int p, a;
    size_t len, i;
    char err[256];
    while (scanf("%d %d %zu", &p, &a, &len) == 3) {
        char *text;
        int32_t *ids;
        size_t n;
        if (getchar() != '\n') return 2;
        text = malloc(len + 1);
        if (!text) return 3;
        if (fread(text, 1, len, stdin) != len) return 2;
        if (getchar() != '\n') return 2;
        if (tok_tokenize(v, text, len, a, p, &ids, &n, err, sizeof err)) {
            printf("ERR %s\n", err);
        } else {
            for (i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
            fputc('\n', stdout);
            free(ids);
        }
        free(text);
    }
    return 0;
}

static int do_detok(const tok_vocab *v)
{
    int r, u;
    size_t k, i;
    char err[256];
    jbuf b;
    jbuf_init(&b);
    while (scanf("%d %d %zu", &r, &u, &k) == 3) {
        int32_t *ids = malloc((k + 1) * sizeof *ids);
        if (!ids) return 3;
        for (i = 0; i < k; i++)
            if (scanf("%d", &ids[i]) != 1) return 2;
        jbuf_reset(&b);
        if (tok_detokenize(v, ids, k, r, u, &b, err, sizeof err)) printf("ERR %s", err);
        else put_hex(b.p, b.len);
        fputc('\n', stdout);
        free(ids);
    }
    jbuf_free(&b);
    return 0;
}

int main(int argc, char **argv)
{
    char err[256];
    tok_vocab *v;
    int rc;
    if (argc != 3) {
        fprintf(stderr, "usage: tokenizer_driver VOCAB.gguf tok|detok|info\n");
        return 2;
    }
    v = tok_load(argv[1], err, sizeof err);
    if (!v) {
        printf("LOADERR %s\n", err);
        return 1;
    }
    if (strcmp(argv[2], "info") == 0) rc = do_info(v);
    else if (strcmp(argv[2], "tok") == 0) rc = do_tok(v);
    else if (strcmp(argv[2], "detok") == 0) rc = do_detok(v);
    else rc = 2;
    fflush(stdout);
    tok_free(v);
    return rc;
}
