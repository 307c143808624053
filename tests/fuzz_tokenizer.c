/*
 * fuzz_tokenizer.c -- libFuzzer target for the tokenizer (src/text/tokenizer*.c, issue #22.6).
 *
 * Loads llama.cpp's vocabulary GGUFs once (BANKML_FUZZ_VOCAB_DIR, default ../shared/vocab): SentencePiece
 * (llama-spm), byte-level BPE with its pre-tokenizers (gpt-2, llama-bpe, qwen2, deepseek-coder,
 * command-r), WordPiece (bert-bge). The first input byte picks the vocabulary and the flags, the rest is
 * the text. tok_tokenize must answer 0 with ids inside the vocabulary, or -1 with a reason; the ids then
 * detokenize (both flag settings) without error. ASan/UBSan catch the rest.
 *
 *   make build/fuzz/fuzz_tokenizer && build/fuzz/fuzz_tokenizer -max_total_time=60 corpus tests/fuzz-seeds/fuzz_tokenizer
 */
#include "base/json.h"
#include "text/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static const char *const fz_names[] = {"llama-spm", "gpt-2", "llama-bpe", "qwen2", "deepseek-coder", "command-r",
                                       "bert-bge"};
#define FZ_N (sizeof fz_names / sizeof fz_names[0])
static tok_vocab *fz_vocab[FZ_N];
static size_t fz_loaded;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("BANKML_FUZZ_VOCAB_DIR");
    if (!dir) dir = "../shared/vocab";
    for (size_t i = 0; i < FZ_N; i++) {
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, fz_names[i]);
        fz_vocab[fz_loaded] = tok_load(path, err, sizeof err);
        if (fz_vocab[fz_loaded]) fz_loaded++;
        else fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err);
    }
    if (!fz_loaded) {
        fprintf(stderr, "fuzz_tokenizer: no vocabulary loaded (set BANKML_FUZZ_VOCAB_DIR)\n");
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    char err[512];
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (n < 1) return 0;
    const tok_vocab *v = fz_vocab[d[0] % fz_loaded];
    int add_special = (d[0] >> 4) & 1, parse_special = (d[0] >> 5) & 1;
    err[0] = 0;
    if (tok_tokenize(v, (const char *)d + 1, n - 1, add_special, parse_special, &ids, &n_ids, err, sizeof err) != 0) {
        if (!err[0] || ids || n_ids) abort();
        return 0;
    }
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= tok_n_tokens(v)) abort();
    for (int flags = 0; flags < 4; flags++) {
        jbuf out;
        jbuf_init(&out);
        if (tok_detokenize(v, ids, n_ids, flags & 1, flags >> 1, &out, err, sizeof err) != 0) abort();
        jbuf_free(&out);
    }
    free(ids);
    return 0;
}
