/*
 * test_tokenizer.c -- exact tokenizations of src/text/tokenizer*.c on a
 * SentencePiece vocabulary (stories260K), a byte-level BPE one (Qwen2), a
 * WordPiece one (bert-bge) and a Unigram one (nomic-bert-moe), with the ids
 * llama.cpp b11669's llama-tokenize and libllama print for the same text,
 * plus hostile input: invalid UTF-8, NUL bytes, 10 MB of one character,
 * refused tokenizer models. The full comparison against libllama
 * (every vocabulary, fuzzed) is testing/oracle_tokenizer.py.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "text/tokenizer.h"
#include "text/tokenizer_int.h"

static tok_vocab *open_vocab(const char *rel)
{
    char err[256] = "";
    const char *path = test_shared(rel);
    tok_vocab *v;
    if (!path) return NULL;
    v = tok_load(path, err, sizeof err);
    if (!v) test_fail(__FILE__, __LINE__, "tok_load(%s): %s", rel, err);
    return v;
}

/* Tokenizes s and compares with want[0..nwant). */
static void check_ids(const tok_vocab *v, const char *s, size_t len, int add_special,
                      int parse_special, const int32_t *want, size_t nwant, int line)
{
    int32_t *ids = NULL;
    size_t n = 0, i;
    char err[256] = "";
    if (tok_tokenize(v, s, len, add_special, parse_special, &ids, &n, err, sizeof err)) {
        test_fail(__FILE__, line, "tok_tokenize failed: %s", err);
        return;
    }
    if (n != nwant) {
        test_fail(__FILE__, line, "%zu ids, want %zu", n, nwant);
    } else {
        for (i = 0; i < n; i++)
            if (ids[i] != want[i]) {
                test_fail(__FILE__, line, "id %zu = %d, want %d", i, ids[i], want[i]);
                break;
            }
    }
    free(ids);
}

#define IDS(v, s, add, parse, ...)                                                  \
    do {                                                                           \
        static const int32_t w_[] = { __VA_ARGS__ };                               \
        check_ids((v), (s), sizeof(s) - 1, (add), (parse), w_, sizeof w_ / sizeof *w_, \
                  __LINE__);                                                       \
    } while (0)

TEST(tokenizer_stories_spm)
{
    tok_vocab *v = open_vocab("models/stories260K.gguf");
    if (!v) SKIP("models/stories260K.gguf not found");
    CHECK_INT(tok_n_tokens(v), 512);
    CHECK_INT(tok_type(v), TOK_TYPE_SPM);
    CHECK_INT(tok_bos(v), 1);
    CHECK_INT(tok_eos(v), 2);
    CHECK_INT(tok_add_bos(v), 1);
    CHECK_INT(tok_add_space_prefix(v), 1);
    /* llama-tokenize -m stories260K.gguf -p 'Hello world' --ids (and --no-bos) */
    IDS(v, "Hello world", 1, 1, 1, 346, 306, 414, 263, 304, 341);
    IDS(v, "Hello world", 0, 1, 346, 306, 414, 263, 304, 341);
    IDS(v, " Hello, y'all! 3333 tokens", 0, 1,
        410, 346, 306, 414, 432, 348, 439, 388, 443, 410, 472, 472, 472, 472, 267, 433, 302, 419);
    IDS(v, "<|im_start|>user\nhi<|im_end|>", 0, 0,
        410, 504, 506, 288, 98, 356, 295, 413, 506, 505, 425, 419, 285, 13, 415, 417, 504, 506,
        288, 98, 367, 506, 505);
    /* byte fallback and a Unicode mix (libllama, kit_tokenize) */
    IDS(v, "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd 12345 \xf0\x9f\xa6\x99\n\n", 0, 1,
        280, 412, 431, 485, 410, 231, 192, 163, 232, 168, 192, 410, 475, 479, 472, 484, 480, 410,
        243, 162, 169, 156, 13, 13);
    IDS(v, "a\xc0\x80" "b \xff\xfe z", 0, 0, 261, 195, 131, 430, 410, 258, 257, 229, 153, 132, 451);
    IDS(v, "a\0b\0", 0, 0, 261, 3, 430, 3);
    tok_free(v);
}

TEST(tokenizer_qwen2_bpe)
{
    tok_vocab *v = open_vocab("vocab/ggml-vocab-qwen2.gguf");
    if (!v) SKIP("vocab/ggml-vocab-qwen2.gguf not found");
    CHECK_INT(tok_n_tokens(v), 151936);
    CHECK_INT(tok_type(v), TOK_TYPE_BPE);
    CHECK_STR(tok_pre_name(v), "qwen2");
    CHECK_INT(tok_bos(v), 151643);
    CHECK_INT(tok_eos(v), 151643);
    CHECK_INT(tok_eot(v), 151645);
    CHECK_INT(tok_nl(v), 198);
    CHECK_INT(tok_add_bos(v), 0);
    CHECK_INT(tok_is_eog(v, 151643), 1);
    CHECK_INT(tok_is_eog(v, 151645), 1);
    CHECK_INT(tok_is_eog(v, 151644), 0);
    CHECK_INT(tok_is_eog(v, 9707), 0);
    CHECK_INT(tok_is_eog(v, -1), 0);
    /* llama-tokenize -m ggml-vocab-qwen2.gguf -p ... --ids */
    IDS(v, "Hello world", 1, 1, 9707, 1879);
    IDS(v, " Hello, y'all! 3333 tokens", 1, 1, 21927, 11, 379, 64848, 0, 220, 18, 18, 18, 18, 11211);
    IDS(v, "<|im_start|>user\nhi<|im_end|>", 0, 1, 151644, 872, 198, 6023, 151645);
    /* without special parsing the markers are text (libllama) */
    IDS(v, "<|im_start|>user\nhi<|im_end|>", 0, 0,
        27, 91, 318, 4906, 91, 29, 872, 198, 6023, 27, 91, 318, 6213, 91, 29);
    IDS(v, "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd 12345 \xf0\x9f\xa6\x99\n\n", 0, 1,
        924, 58858, 220, 108386, 220, 16, 17, 18, 19, 20, 11162, 99, 247, 271);
    /* invalid UTF-8 becomes U+FFFD per bad byte (9973), NUL is byte 0 (188) */
    IDS(v, "a\xc0\x80" "b \xff\xfe z", 0, 0, 64, 9973, 65, 220, 9973, 1147);
    IDS(v, "a\0b\0", 0, 0, 64, 188, 65, 188);
    tok_free(v);
}

TEST(tokenizer_pieces)
{
    tok_vocab *v = open_vocab("vocab/ggml-vocab-qwen2.gguf");
    jbuf b;
    char err[256];
    static const int32_t hello[] = { 9707, 1879, 151645 };
    if (!v) SKIP("vocab/ggml-vocab-qwen2.gguf not found");
    jbuf_init(&b);
    CHECK_INT(tok_piece(v, 9707, 1, &b), 5);
    CHECK_STR(b.p, "Hello");
    jbuf_reset(&b);
    CHECK_INT(tok_piece(v, 151645, 0, &b), 0);        /* control, not special */
    CHECK_INT(tok_piece(v, 151645, 1, &b), 10);
    CHECK_STR(b.p, "<|im_end|>");
    jbuf_reset(&b);
    CHECK_INT(tok_piece(v, 188, 1, &b), 1);           /* "Ā" stands for byte 0 */
    CHECK_INT(b.p[0], 0);
    CHECK_INT(tok_piece(v, 151936, 1, &b), -1);
    jbuf_reset(&b);
    CHECK_INT(tok_detokenize(v, hello, 3, 0, 0, &b, err, sizeof err), 0);
    CHECK_STR(b.p, "Hello world");
    jbuf_reset(&b);
    CHECK_INT(tok_detokenize(v, hello, 3, 0, 1, &b, err, sizeof err), 0);
    CHECK_STR(b.p, "Hello world<|im_end|>");
    jbuf_free(&b);
    tok_free(v);

    v = open_vocab("models/stories260K.gguf");
    if (!v) SKIP("models/stories260K.gguf not found");
    {
        static const int32_t ids[] = { 1, 346, 306, 414, 263, 304, 341 };
        jbuf_init(&b);
        /* llama_detokenize: a removed BOS keeps the leading space of "▁H";
         * without a BOS the space SentencePiece added is dropped */
        CHECK_INT(tok_detokenize(v, ids, 7, 1, 0, &b, err, sizeof err), 0);
        CHECK_STR(b.p, " Hello world");
        jbuf_reset(&b);
        CHECK_INT(tok_detokenize(v, ids + 1, 6, 0, 0, &b, err, sizeof err), 0);
        CHECK_STR(b.p, "Hello world");
        jbuf_free(&b);
    }
    tok_free(v);
}

TEST(tokenizer_ten_megabytes)
{
    tok_vocab *v = open_vocab("models/stories260K.gguf");
    size_t len = (size_t)10 << 20, n = 0, i, bad = 0;
    char *s, err[256] = "";
    int32_t *ids = NULL;
    struct timespec t0, t1;
    double secs;
    if (!v) SKIP("models/stories260K.gguf not found");
    s = malloc(len);
    if (!s) { tok_free(v); SKIP("no memory for 10 MB"); }
    memset(s, 'a', len);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_INT(tok_tokenize(v, s, len, 0, 0, &ids, &n, err, sizeof err), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    /* libllama: "▁a" (261) then "a" (412) for each of the other bytes */
    CHECK_U64(n, len);
    if (ids && n == len) {
        CHECK_INT(ids[0], 261);
        for (i = 1; i < n; i++) bad += ids[i] != 412;
        CHECK_U64(bad, 0);
    }
    CHECK(secs < 60.0);
    free(ids);
    free(s);
    tok_free(v);
}

static size_t put_le(uint8_t *b, uint64_t x, int bytes)
{
    int k;
    for (k = 0; k < bytes; k++) b[k] = (uint8_t)(x >> (8 * k));
    return (size_t)bytes;
}

/* A GGUF v3 in memory with no tensors and one key, tokenizer.ggml.model =
 * model (a string); b must hold 64 + strlen(model) bytes. */
static size_t tiny_gguf(uint8_t *b, const char *model)
{
    static const char key[] = "tokenizer.ggml.model";
    size_t n = 0, kl = sizeof key - 1, ml = strlen(model);
    memcpy(b, "GGUF", 4);
    n = 4;
    n += put_le(b + n, 3, 4);           /* version */
    n += put_le(b + n, 0, 8);           /* tensors */
    n += put_le(b + n, 1, 8);           /* keys */
    n += put_le(b + n, kl, 8);
    memcpy(b + n, key, kl);
    n += kl;
    n += put_le(b + n, 8, 4);           /* GGUF_VT_STRING */
    n += put_le(b + n, ml, 8);
    memcpy(b + n, model, ml);
    return n + ml;
}

TEST(tokenizer_refusals)
{
    static const struct { const char *model, *want; } cases[] = {
        { "rwkv", "tokenizer model 'rwkv' is not supported by bankml" },
        { "plamo2", "tokenizer model 'plamo2' is not supported by bankml" },
        { "none", "the model has no vocabulary (tokenizer.ggml.model 'none')" },
        { "sentencepiece", "unknown tokenizer: 'sentencepiece'" },
        /* the known models pass the name check and fail on the missing tokens */
        { "bert", "cannot find tokenizer vocab in model file" },
        { "t5", "cannot find tokenizer vocab in model file" },
    };
    char err[256] = "";
    uint8_t b[128];
    size_t i;
    CHECK(tok_load("/nonexistent/x.gguf", err, sizeof err) == NULL);
    CHECK(strstr(err, "No such file") != NULL);
    for (i = 0; i < sizeof cases / sizeof *cases; i++) {
        gguf_header h;
        size_t n = tiny_gguf(b, cases[i].model);
        memset(&h, 0, sizeof h);
        CHECK_INT(gguf_parse(b, n, &h, NULL, err, sizeof err), GGUF_OK);
        err[0] = 0;
        CHECK(tok_load_gguf(&h, b, n, err, sizeof err) == NULL);
        CHECK_STR(err, cases[i].want);
        gguf_header_free(&h);
    }
}

TEST(tokenizer_bert_wordpiece)
{
    tok_vocab *v = open_vocab("vocab/ggml-vocab-bert-bge.gguf");
    jbuf b;
    char err[256];
    static const int32_t ids[] = { 101, 7592, 2088, 999, 1045, 1005, 1049, 15743, 7668, 102 };
    if (!v) SKIP("vocab/ggml-vocab-bert-bge.gguf not found");
    CHECK_INT(tok_n_tokens(v), 30522);
    CHECK_INT(tok_type(v), TOK_TYPE_WPM);
    CHECK_STR(tok_model_name(v), "bert");
    CHECK_INT(tok_bos(v), 101);
    CHECK_INT(tok_eos(v), TOK_NULL);
    CHECK_INT(tok_sep(v), 102);
    CHECK_INT(tok_unk(v), 100);
    CHECK_INT(tok_mask(v), 103);
    CHECK_INT(tok_nl(v), 0);
    CHECK_INT(tok_add_bos(v), 1);
    CHECK_INT(tok_add_eos(v), 0);
    /* libllama (kit_tokenize): lower case, accents stripped, [CLS] ... [SEP] */
    IDS(v, "Hello World! I'm na\xc3\xafve caf\xc3\xa9", 1, 0,
        101, 7592, 2088, 999, 1045, 1005, 1049, 15743, 7668, 102);
    IDS(v, "Hello World! I'm na\xc3\xafve caf\xc3\xa9", 0, 0,
        7592, 2088, 999, 1045, 1005, 1049, 15743, 7668);
    /* CJK one per word, full-width letters unknown, punctuation split */
    IDS(v, "\xe4\xb8\xad\xe6\x96\x87 \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3 (1,234) "
           "\xe2\x91\xa0\xc2\xbd \xef\xac\x81", 0, 0,
        1746, 1861, 100, 1006, 1015, 1010, 22018, 1007, 100, 1984);
    /* invalid UTF-8 and NUL vanish */
    IDS(v, "a\xc0\x80" "b \xff\xfe z\0y", 0, 0, 11113, 1062, 2100);
    IDS(v, "[CLS] hi [MASK]<mask> x <mask>", 1, 1,
        101, 101, 7632, 103, 1026, 7308, 1028, 1060, 1026, 7308, 1028, 102);
    IDS(v, "\xf0\x9f\xa6\x99 llama.cpp\t\n  tokenizers   ", 0, 0,
        100, 2222, 8067, 1012, 18133, 2361, 19204, 17629, 2015);
    {
        int32_t *out = (int32_t *)1;
        size_t n = 9;
        CHECK_INT(tok_tokenize(v, "   ", 3, 0, 0, &out, &n, err, sizeof err), 0);
        CHECK(out == NULL);
        CHECK_U64(n, 0);
    }
    jbuf_init(&b);
    CHECK_INT(tok_piece(v, 7592, 0, &b), 6);
    CHECK_STR(b.p, " hello");
    jbuf_reset(&b);
    CHECK_INT(tok_detokenize(v, ids, 10, 1, 0, &b, err, sizeof err), 0);
    CHECK_STR(b.p, " hello world! i'm naive cafe");
    jbuf_reset(&b);
    CHECK_INT(tok_detokenize(v, (const int32_t[]){ 101, 7592, 2088, 999, 102 }, 5, 0, 1, &b, err,
                             sizeof err), 0);
    CHECK_STR(b.p, "[CLS] hello world![SEP]");
    jbuf_free(&b);
    tok_free(v);
}

TEST(tokenizer_nomic_unigram)
{
    tok_vocab *v = open_vocab("vocab/ggml-vocab-nomic-bert-moe.gguf");
    jbuf b;
    char err[256];
    if (!v) SKIP("vocab/ggml-vocab-nomic-bert-moe.gguf not found");
    CHECK_INT(tok_n_tokens(v), 250048);
    CHECK_INT(tok_type(v), TOK_TYPE_UGM);
    CHECK_STR(tok_model_name(v), "t5");
    CHECK_INT(tok_bos(v), 0);
    CHECK_INT(tok_eos(v), 2);
    CHECK_INT(tok_unk(v), 3);
    CHECK_INT(tok_pad(v), 1);
    CHECK_INT(tok_mask(v), 250001);
    CHECK_INT(tok_nl(v), 0);                  /* "\n" normalizes to nothing: the default pad */
    CHECK_INT(tok_add_bos(v), 1);
    CHECK_INT(tok_add_eos(v), 1);
    CHECK_INT(tok_add_space_prefix(v), 1);
    CHECK(tok_attr(v, 250001) & TOK_ATTR_LSTRIP);
    /* libllama (kit_tokenize) */
    IDS(v, "Hello World! I'm na\xc3\xafve caf\xc3\xa9", 1, 0,
        0, 35378, 6661, 38, 87, 25, 39, 24, 9392, 272, 26216, 2);
    /* the charsmap (NFKC): full-width letters, circled digits, ligatures */
    IDS(v, "\xe4\xb8\xad\xe6\x96\x87 \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3 (1,234) "
           "\xe2\x91\xa0\xc2\xbd \xef\xac\x81", 0, 0,
        6, 32095, 47457, 15, 133063, 121763, 106, 92759, 809);
    /* invalid bytes are U+FFFD, unknown (3) with the NUL, runs merged */
    IDS(v, "a\xc0\x80" "b \xff\xfe z\0y", 0, 0, 10, 3, 275, 6, 3, 97, 3, 53);
    /* <mask> eats the space before it (LSTRIP) */
    IDS(v, "[CLS] hi [MASK]<mask> x <mask>", 1, 1,
        0, 378, 441, 19759, 268, 1274, 378, 40639, 605, 268, 250001, 1022, 250001, 2);
    /* white space runs collapse, tabs and newlines are spaces */
    IDS(v, "\xf0\x9f\xa6\x99 llama.cpp\t\n  tokenizers   ", 0, 0,
        6, 3, 67140, 5, 238, 6366, 47, 1098, 52825, 7);
    jbuf_init(&b);
    CHECK_INT(tok_detokenize(v, (const int32_t[]){ 0, 35378, 6661, 38, 87, 25, 39, 24, 9392, 272,
                                                   26216, 2 }, 12, 1, 0, &b, err, sizeof err), 0);
    CHECK_STR(b.p, " Hello World! I'm na\xc3\xafve caf\xc3\xa9");
    jbuf_reset(&b);
    CHECK_INT(tok_detokenize(v, (const int32_t[]){ 0, 35378, 6661, 38, 2 }, 5, 0, 1, &b, err,
                             sizeof err), 0);
    CHECK_STR(b.p, "<s> Hello World!</s>");
    jbuf_reset(&b);
    CHECK_INT(tok_detokenize(v, (const int32_t[]){ 6, 3, 67140 }, 3, 0, 0, &b, err, sizeof err), 0);
    CHECK_STR(b.p, " llama");
    jbuf_free(&b);
    tok_free(v);
}

TEST(tokenizer_other_vocabs)
{
    /* one string per pre-tokenizer family, ids from libllama (kit_tokenize) */
    static const char text[] = "I'm 12345 caf\xc3\xa9  \t\n x";
    tok_vocab *v = open_vocab("vocab/ggml-vocab-llama-bpe.gguf");
    if (!v) SKIP("vocab/ggml-vocab-llama-bpe.gguf not found");
    CHECK_INT(tok_add_bos(v), 1);
    CHECK_INT(tok_eot(v), 128009);
    IDS(v, text, 1, 1, 128000, 40, 2846, 220, 4513, 1774, 53050, 99351, 865);
    tok_free(v);
    v = open_vocab("vocab/ggml-vocab-deepseek-llm.gguf");
    if (!v) SKIP("vocab/ggml-vocab-deepseek-llm.gguf not found");
    IDS(v, text, 0, 1, 40, 6, 76, 207, 16, 17, 18, 19, 20, 26506, 587, 64860, 185, 1376);
    IDS(v, text, 1, 1, 100000, 40, 6, 76, 207, 16, 17, 18, 19, 20, 26506, 587, 64860, 185, 1376);
    tok_free(v);
}

/* Splits s with pre-tokenizer pre and compares the piece lengths (code
 * points) with want[0..nwant). */
static void check_pieces(int pre, const char *s, const int32_t *want, size_t nwant, int line)
{
    uint32_t cp[128];
    uint8_t cls[128];
    size_t i = 0, n = 0, len = strlen(s), k;
    ivec pieces = {0};
    while (i < len && n < 128) {
        cp[n] = tk_utf8_next((const uint8_t *)s, len, &i);
        cls[n] = (uint8_t)tk_cp_class(cp[n]);
        n++;
    }
    if (tk_pretokenize(pre, cp, cls, n, &pieces)) { test_fail(__FILE__, line, "out of memory"); return; }
    if (pieces.n != nwant) test_fail(__FILE__, line, "%zu pieces, want %zu", pieces.n, nwant);
    else
        for (k = 0; k < nwant; k++)
            if (pieces.v[k] != want[k]) {
                test_fail(__FILE__, line, "piece %zu has %d code points, want %d", k, pieces.v[k], want[k]);
                break;
            }
    free(pieces.v);
}

#define PIECES(pre, s, ...)                                                                   \
    do {                                                                                      \
        static const int32_t w_[] = { __VA_ARGS__ };                                          \
        check_pieces((pre), (s), w_, sizeof w_ / sizeof *w_, __LINE__);                       \
    } while (0)

TEST(tokenizer_tekken_gpt4o_pieces)
{
    /* The pieces std::regex gives llama.cpp's collapsed TEKKEN / GPT4O regexes
     * (ECMAScript, as libstdc++ runs them; checked there with the collapsed
     * text), in code points:
     * [Hello][World][ \xc3\x89Cole][ \xc3\x93Na][ ][1][2][ x][/y][\r\n][/][ DON]['T][  \n][ ][ ab]['s]
     * A non-ASCII letter collapses to one byte that is both a capital and a
     * small letter, so " ÉCole" is one piece; "ab's" keeps the 's only in
     * GPT-4o, whose digits go in threes. */
    static const char t[] = "HelloWorld \xc3\x89" "Cole \xc3\x93Na 12 x/y\r\n/ DON'T  \n  ab's";
    PIECES(PRE_TEKKEN, t, 5, 5, 6, 4, 1, 1, 1, 2, 2, 2, 1, 4, 2, 3, 1, 3, 2);
    PIECES(PRE_GPT4O, t, 5, 5, 6, 4, 1, 2, 2, 2, 2, 1, 6, 3, 1, 5);
    /* U*W+ keeps the most capitals that still leave a small letter: "ÀBcd" one
     * piece; "ÉA": É then A; capitals alone run to the end (P?U+W*) */
    PIECES(PRE_TEKKEN, "\xc3\x80" "Bcd \xc3\x89" "A ABC", 4, 2, 1, 4);
    PIECES(PRE_GPT4O, "12345 I'LL x", 3, 2, 5, 2);
}
