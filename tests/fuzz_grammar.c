/*
 * fuzz_grammar.c -- libFuzzer target for the GBNF parser and a short walk
 * of its automaton (src/sampling/grammar.c).
 *
 * Any input: gr_parse must refuse it with a reason or return a grammar.
 * A grammar's start stacks are built over a small vocabulary (ASCII
 * letters, a space, multi-byte and partial UTF-8 pieces, an invalid byte,
 * an empty piece and an end token), then up to 12 steps: gr_apply over
 * every token, the first token it leaves is accepted (its gr_allows must
 * agree), until none is left or the stacks pass 64. A refusal past the parser must carry a
 * reason. ASan/UBSan catch the rest (leaks, overreads, deep recursion).
 *
 *   make build/fuzz/fuzz_grammar && build/fuzz/fuzz_grammar -max_total_time=60 tests/fuzz-seeds/fuzz_grammar
 */
#include "sampling/grammar.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static const char *const PIECES[] = {
    "a", "b", "c", "ab", " ", "\n", "{", "}", "\"", "0", "1", "\xc3", "\xa9", "\xc3\xa9", "\xe2\x82\xac",
    "\xf0\x9f", "\x98\x80", "\x80", "", "</s>", "x y", "[", "]", "-", "\\",
};
#define NV ((int32_t)(sizeof PIECES / sizeof PIECES[0]))

static const char *fz_piece(void *ctx, int32_t id, size_t *len)
{
    (void)ctx;
    *len = strlen(PIECES[id]);
    return PIECES[id];
}

static int fz_eog(void *ctx, int32_t id)
{
    (void)ctx;
    return id == 19;
}

static gr_vocab *vocab;

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    char err[512];
    if (n > 1024) return 0;   /* the repetition limits already bound the rules; keep runs short */
    if (!vocab) vocab = gr_vocab_new(NV, fz_piece, fz_eog, NULL, err, sizeof err);
    if (!vocab) abort();
    err[0] = 0;
    gr_grammar *g = gr_parse((const char *)d, n, NULL, err, sizeof err);
    if (!g) {
        if (!err[0]) { fprintf(stderr, "refused without a reason\n"); abort(); }
        return 0;
    }
    err[0] = 0;
    gr_state *st = gr_state_new(g, vocab, err, sizeof err);
    if (!st) {
        if (!err[0]) { fprintf(stderr, "no start stacks and no reason\n"); abort(); }
        gr_free(g);
        return 0;
    }
    /* an ambiguous grammar (x+++...) multiplies the stacks as it does in
     * llama.cpp; walking it is slow, not wrong: stop there */
    for (int step = 0; step < 12 && gr_n_stacks(st) <= 64; step++) {
        smp_token c[NV];
        for (int32_t i = 0; i < NV; i++) c[i] = (smp_token){i, 0.0f, 0.0f};
        if (gr_apply(st, c, (size_t)NV) != 0) {
            if (!gr_error(st)[0]) { fprintf(stderr, "apply failed without a reason\n"); abort(); }
            break;
        }
        int32_t pick = -1;
        for (int32_t i = 0; i < NV; i++) {
            int a = gr_allows(st, i);
            if (a >= 0 && a != (c[i].logit != -INFINITY)) { fprintf(stderr, "allows and apply disagree\n"); abort(); }
            if (pick < 0 && c[i].logit != -INFINITY && i != 19) pick = i;
        }
        if (pick < 0) break;
        err[0] = 0;
        if (gr_accept(st, pick, err, sizeof err) != 0) {
            if (!err[0]) { fprintf(stderr, "accept failed without a reason\n"); abort(); }
            break;
        }
    }
    gr_state_free(st);
    gr_free(g);
    return 0;
}
