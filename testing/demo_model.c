/*
 * demo_model.c -- write models/demo.gguf, bankml's built-in demo model.
 *
 * Usage: demo-model OUT.gguf
 *
 * The file is a GGUF v3 "qwen3" model with random weights, a byte-level BPE
 * vocabulary and a ChatML chat template. It exists so that `make run` and the
 * tests have a model to serve without any download, and so that its sha256
 * can be pinned in models.FORK.json. That pin only works if every machine and
 * every compiler writes the same bytes, so this program:
 *
 *   - takes no input but its own tables (no network, nothing from ../shared);
 *   - draws weights from splitmix64, an integer PRNG;
 *   - turns them into floats with exact operations only: a weight is an
 *     integer (a sum of four uniform integers) times a power of two, so no
 *     rounding happens anywhere, whatever the FPU, the optimisation level or
 *     -ffp-contract (there is never an add next to a multiply to fuse);
 *   - converts to F16 by hand on the bit pattern (round to nearest even, though
 *     with these values it never has to round);
 *   - writes every integer and float little-endian byte by byte, so the host's
 *     byte order does not matter either.
 *
 * The layout follows gguf-py's GGUFWriter (header, key/values, tensor infos,
 * padding to 32, tensor data each padded to 32), with the keys llama.cpp reads
 * for a qwen3 graph. Matrices are scaled by fan-in (std about 1/sqrt(n_in))
 * and the embedding is kept small, so that the layers, not the input
 * embedding, steer the residual stream: a random model whose stream is
 * dominated by the input embedding only repeats its last token, and with
 * tied embeddings that danger is larger still (see the scale notes above
 * plan_tensors).
 *
 * The vocabulary: the 256 byte tokens in GPT-2's byte-to-unicode order, then
 * the tokens of a byte-level BPE trained here on an embedded word list, then
 * <|endoftext|>, <|im_start|>, <|im_end|> (CONTROL).
 *
 * libc only; the result is written to OUT.tmp and renamed, so a failed run
 * never leaves a half-written file that make would take as up to date.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Shape and constants

#define N_EMBD     256
#define N_LAYER    4
#define N_HEAD     4
#define N_HEAD_KV  2
#define HEAD_DIM   64      /* N_EMBD / N_HEAD */
#define N_FF       768
#define N_CTX      4096
#define ALIGNMENT  32

#define SEED       0x62616e6b6d6c3031ull   /* "bankml01" */

/* IEEE-754 single bit patterns of the float hyper-parameters, written as bits
 * so that not even the compiler's decimal-to-binary conversion is involved. */
#define BITS_ROPE_BASE 0x49742400u   /* 1000000.0f */
#define BITS_RMS_EPS   0x358637bdu   /* 1e-6f (nearest float) */

/* GGUF value types (gguf.h / gguf-py GGUFValueType). */
enum { GV_UINT32 = 4, GV_INT32 = 5, GV_FLOAT32 = 6, GV_BOOL = 7, GV_STRING = 8, GV_ARRAY = 9 };
/* ggml tensor types used here. */
enum { GT_F32 = 0, GT_F16 = 1 };
/* llama.cpp token types. */
enum { TT_NORMAL = 1, TT_CONTROL = 3 };

static const char CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";

/* Common English words, no word twice: the BPE training corpus (see
 * build_vocab), so that ordinary English tokenizes into whole words. Their
 * order breaks ties between equally frequent pairs: do not reorder them
 * without re-pinning the model's sha256. */
static const char WORDS[] =
    "the and you that was for are with his they this have from one had word but not what all were "
    "when we there can an your which their said if do will each about how up out them then she "
    "many some so these would other into has more her two like him see time could no make than "
    "first been its who now people my made over did down only way find use may water long little "
    "very after words called just where most know hello world assistant user system is it in of "
    "to be at by or as on a i me he our us get go come came went say says good new old great "
    "small big high low right left last next own same few less much well also back still even "
    "never always often here why because while before under between through around again off any "
    "every both such another something nothing thing things day days year years man men woman "
    "women child children life home house place part work play name number line sound light night "
    "hand hands head eyes face side end point fact kind sort mind heart love think thought want "
    "need feel felt try tell told ask give gave take took help show let keep put seem turn start "
    "stop run walk read write learn open close live move talk answer question yes please thank "
    "thanks sorry okay sure maybe today tomorrow model language text code data file server chat "
    "token tokens computer program numbers questions example should must might shall being having "
    "doing going looking making using trying asking together without within during until against "
    "among toward upon whether though although school city country state family friend friends "
    "group problem story money food book books paper music game room door window tree trees river "
    "sea sun moon star stars sky air fire earth green blue red white black color colour happy sad "
    "hard easy simple clear true false real best better worse really quite almost enough rather "
    "perhaps those whom whose nor too once hi goodbye welcome nice fine bad young short large "
    "early late full empty free hot cold warm cool dark bright fast slow quick wrong different "
    "important possible able ready three four five six seven eight nine ten hundred thousand "
    "million week month tonight morning evening hour minute second boy girl baby person mother "
    "father brother sister teacher doctor table chair bed kitchen garden street road town bread "
    "milk coffee tea fruit apple rice fish meat dog cat bird horse animal flower grass rain snow "
    "wind cloud mountain island yellow brown gray look leave call got knew saw looked wanted used "
    "found asked worked does done begin began hear believe bring happen provide sit stand lose "
    "pay meet include continue set change lead understand watch follow create speak allow add "
    "spend grow offer remember consider appear buy wait serve die send expect build stay fall cut "
    "reach kill remain suggest raise pass sell require report decide pull above across along "
    "behind below beneath beside beyond except inside near onto outside past since throughout "
    "unless either neither idea reason case phone letter news business class lesson study "
    "information knowledge science history art nature health body eye death war peace power voice";

static const char *const SPECIALS[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>" };
#define N_SPECIAL 3

// ---------------------------------------------------------------------------
// Random numbers and exact floats

/* splitmix64: one 64-bit add and three xor-shift-multiplies, defined only by
 * integer arithmetic, so the stream is the same everywhere. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A bell-shaped integer in [-2048, 2044]: the sum of four uniform integers in
 * [-512, 511] taken from one draw. Its std is about 591 (4 * 1024^2 / 12). It
 * has at most 11 significant bits, so it and any power-of-two multiple of it
 * (down to 2^-24) is exact in F16 as well as in F32. */
static int32_t rng_bell(uint64_t *s)
{
    uint64_t r = rng_next(s);
    int32_t sum = 0;
    for (int i = 0; i < 4; i++) {
        sum += (int32_t)((r >> (10 * i)) & 1023u) - 512;
    }
    return sum;
}

/* 2^-k as a float, built from its exponent field (0 <= k <= 126). */
static float pow2_neg(int k)
{
    uint32_t bits = (uint32_t)(127 - k) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* F32 -> F16 by hand, round to nearest, ties to even. Done on the bit
 * pattern with integers so that no FPU mode or compiler intrinsic can
 * change the result. */
static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = (int32_t)((x >> 23) & 0xffu);
    uint32_t man = x & 0x7fffffu;

    if (exp == 0xff) {                        /* inf or NaN (quiet NaN kept a NaN) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u));
    }
    int32_t e = exp - 127 + 15;               /* the half's biased exponent */
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00u);    /* too large: infinity */
    }
    if (e <= 0) {                             /* half subnormal (or zero) */
        if (exp == 0) {
            return (uint16_t)sign;            /* float zero/subnormal < 2^-126 */
        }
        uint32_t m = man | 0x800000u;         /* value = m * 2^(exp-150) */
        int shift = 14 - e;                   /* half units are 2^-24 */
        if (shift > 24) {
            return (uint16_t)sign;            /* below half the least subnormal */
        }
        uint32_t h = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) {
            h++;                              /* may carry into the least normal: right */
        }
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
        h++;                                  /* a carry into the exponent is right, up to inf */
    }
    return (uint16_t)(sign | h);
}

/* The converter is the one piece of arithmetic here that could be subtly
 * wrong; check it on the cases that matter before writing anything. */
static int f16_selftest(void)
{
    static const struct { uint32_t in; uint16_t out; } cases[] = {
        { 0x3f800000u, 0x3c00u },   /* 1.0 */
        { 0xbf800000u, 0xbc00u },   /* -1.0 */
        { 0x00000000u, 0x0000u },   /* 0 */
        { 0x477fe000u, 0x7bffu },   /* 65504, the largest half */
        { 0x477ff000u, 0x7c00u },   /* 65520 rounds to infinity */
        { 0x33800000u, 0x0001u },   /* 2^-24, the least subnormal */
        { 0x33000000u, 0x0000u },   /* 2^-25: a tie, to even (0) */
        { 0x33400000u, 0x0001u },   /* 1.5 * 2^-25 rounds up */
        { 0x38800000u, 0x0400u },   /* 2^-14, the least normal */
        { 0x3f801000u, 0x3c00u },   /* 1 + 2^-11: a tie, to even */
        { 0x3f803000u, 0x3c02u },   /* 1 + 3 * 2^-11: a tie, to even (up) */
        { 0x3f801001u, 0x3c01u },   /* just above the tie: up */
        { 0x7f800000u, 0x7c00u },   /* inf */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float f;
        memcpy(&f, &cases[i].in, sizeof f);
        if (f32_to_f16(f) != cases[i].out) {
            return -1;
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Vocabulary: 256 byte tokens, merges from WORDS, then the special tokens

typedef struct {
    char **tok;      /* token text in GPT-2's byte-to-unicode form, UTF-8 */
    int32_t *type;
    size_t n, cap_tok, cap_type;
    char **merge;    /* "left right" */
    size_t n_merge, cap_merge;
    size_t n_normal; /* tokens before the specials */
} Vocab;

/* GPT-2's byte-to-unicode table: printable Latin-1 bytes map to themselves,
 * the other 68 bytes to U+0100.. in byte order. Fills out[b] with the UTF-8
 * text of byte b's token (at most 2 bytes + NUL). */
static void byte_tokens(char out[256][3])
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)n++;
        if (cp < 0x80) {
            out[b][0] = (char)cp;
            out[b][1] = 0;
        } else {
            out[b][0] = (char)(0xc0 | (cp >> 6));
            out[b][1] = (char)(0x80 | (cp & 0x3f));
            out[b][2] = 0;
        }
    }
}

/* Room for `need` elements of `elem` bytes in array p of *cap: returns p
 * itself, or the moved array, or NULL when memory runs out (p is then still
 * the caller's). Doubling keeps the appends linear. */
static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap && p) {
        return p;
    }
    size_t nc = *cap ? *cap : 256;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) {
            return NULL;
        }
        nc *= 2;
    }
    if (nc > SIZE_MAX / elem) {
        return NULL;
    }
    void *np = realloc(p, nc * elem);
    if (np) {
        *cap = nc;
    }
    return np;
}

static int vocab_add(Vocab *v, const char *text, int32_t type)
{
    char **tok = grow(v->tok, &v->cap_tok, v->n + 1, sizeof *v->tok);
    if (!tok) {
        return -1;
    }
    v->tok = tok;
    int32_t *types = grow(v->type, &v->cap_type, v->n + 1, sizeof *v->type);
    if (!types) {
        return -1;
    }
    v->type = types;
    char *s = strdup(text);
    if (!s) {
        return -1;
    }
    v->tok[v->n] = s;
    v->type[v->n] = type;
    v->n++;
    return 0;
}

/* Linear search: the vocabulary has a few thousand entries and is searched
 * once per merge, once per run. */
static long vocab_find(const Vocab *v, const char *text)
{
    for (size_t i = 0; i < v->n; i++) {
        if (strcmp(v->tok[i], text) == 0) {
            return (long)i;
        }
    }
    return -1;
}

/* One training word: its current symbols, as token ids. */
typedef struct {
    int32_t sym[72];
    size_t len;
} Word;

/* The pair table of one training round. Open addressing; the hash only
 * places entries, the choice of the best pair depends on counts and first
 * positions alone, so the result does not depend on it. */
#define PAIR_SLOTS 32768u

typedef struct {
    int32_t a, b;
    uint32_t count;
    uint32_t first;      /* position of the pair's first occurrence in the corpus */
} PairSlot;

/* Trains byte-level BPE on the words the usual way: count adjacent pairs
 * over the whole corpus, merge the most frequent (ties: the one seen first,
 * so the list's order breaks them), repeat until every word is one token.
 * Unlike folding each word from the left (synth_model.py), this gives
 * merges that llama.cpp's rank-ordered encoder replays, so the words come
 * out as single tokens. */
static int train_merges(Vocab *v, Word *w, size_t nw)
{
    static PairSlot tab[PAIR_SLOTS];
    static uint32_t used[PAIR_SLOTS];
    for (;;) {
        size_t n_used = 0;
        uint32_t pos = 0;
        for (size_t i = 0; i < nw; i++) {
            for (size_t j = 0; j + 1 < w[i].len; j++, pos++) {
                int32_t a = w[i].sym[j], b = w[i].sym[j + 1];
                uint32_t h = ((uint32_t)a * 2654435761u ^ (uint32_t)b * 40503u) & (PAIR_SLOTS - 1);
                while (tab[h].count && (tab[h].a != a || tab[h].b != b)) {
                    h = (h + 1) & (PAIR_SLOTS - 1);
                }
                if (!tab[h].count) {
                    if (n_used + 1 >= PAIR_SLOTS / 2) {
                        return -1;                  /* table too full to probe well */
                    }
                    tab[h].a = a;
                    tab[h].b = b;
                    tab[h].first = pos;
                    used[n_used++] = h;
                }
                tab[h].count++;
            }
        }
        if (n_used == 0) {
            return 0;                               /* every word is one token */
        }
        const PairSlot *best = &tab[used[0]];
        for (size_t k = 1; k < n_used; k++) {
            const PairSlot *p = &tab[used[k]];
            if (p->count > best->count || (p->count == best->count && p->first < best->first)) {
                best = p;
            }
        }
        int32_t a = best->a, b = best->b;
        for (size_t k = 0; k < n_used; k++) {
            tab[used[k]].count = 0;
        }

        size_t la = strlen(v->tok[a]), lb = strlen(v->tok[b]);
        char *text = malloc(la + lb + 1), *rule = malloc(la + lb + 2);
        if (!text || !rule) {
            free(text);
            free(rule);
            return -1;
        }
        memcpy(text, v->tok[a], la);
        memcpy(text + la, v->tok[b], lb + 1);
        memcpy(rule, v->tok[a], la);
        rule[la] = ' ';
        memcpy(rule + la + 1, v->tok[b], lb + 1);
        char **merge = grow(v->merge, &v->cap_merge, v->n_merge + 1, sizeof *v->merge);
        if (!merge) {
            free(text);
            free(rule);
            return -1;
        }
        v->merge = merge;
        v->merge[v->n_merge++] = rule;
        /* The same text can arise from two splits; it stays one token. */
        long id = vocab_find(v, text);
        if (id < 0) {
            id = (long)v->n;
            if (vocab_add(v, text, TT_NORMAL) != 0) {
                free(text);
                return -1;
            }
        }
        free(text);

        for (size_t i = 0; i < nw; i++) {
            size_t out = 0;
            for (size_t j = 0; j < w[i].len; j++) {
                if (j + 1 < w[i].len && w[i].sym[j] == a && w[i].sym[j + 1] == b) {
                    w[i].sym[out++] = (int32_t)id;
                    j++;
                } else {
                    w[i].sym[out++] = w[i].sym[j];
                }
            }
            w[i].len = out;
        }
    }
}

/* The training corpus: each word of WORDS bare, with a leading space, and
 * both again capitalised, the four forms text meets after the qwen2
 * pre-tokenizer splits it (it keeps a leading space with the word). */
#define VARIANTS 4

static int build_vocab(Vocab *v)
{
    char bt[256][3];
    byte_tokens(bt);
    for (int b = 0; b < 256; b++) {
        if (vocab_add(v, bt[b], TT_NORMAL) != 0) {
            return -1;
        }
    }
    size_t n_words = 0;
    for (const char *p = WORDS; *p; p++) {
        n_words += *p != ' ' && (p == WORDS || p[-1] == ' ');
    }
    Word *w = calloc(n_words * VARIANTS, sizeof *w);
    if (!w) {
        return -1;
    }
    size_t nw = 0;
    const char *p = WORDS;
    while (*p) {
        while (*p == ' ') {
            p++;
        }
        size_t len = strcspn(p, " ");
        if (len == 0) {
            break;
        }
        if (len + 1 >= sizeof w[0].sym / sizeof w[0].sym[0]) {
            free(w);
            return -1;
        }
        for (int var = 0; var < VARIANTS; var++) {
            Word *x = &w[nw++];
            int space = var & 1, cap = var >> 1;
            x->len = 0;
            if (space) {
                x->sym[x->len++] = ' ';
            }
            for (size_t j = 0; j < len; j++) {
                unsigned char c = (unsigned char)p[j];
                if (cap && j == 0 && c >= 'a' && c <= 'z') {
                    c = (unsigned char)(c - 'a' + 'A');
                }
                x->sym[x->len++] = c;               /* byte b is token b */
            }
        }
        p += len;
    }
    int rc = train_merges(v, w, nw);
    free(w);
    if (rc != 0) {
        return -1;
    }
    v->n_normal = v->n;
    for (int i = 0; i < N_SPECIAL; i++) {
        if (vocab_add(v, SPECIALS[i], TT_CONTROL) != 0) {
            return -1;
        }
    }
    return 0;
}

static void free_vocab(Vocab *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free(v->tok[i]);
    }
    for (size_t i = 0; i < v->n_merge; i++) {
        free(v->merge[i]);
    }
    free(v->tok);
    free(v->type);
    free(v->merge);
}

// ---------------------------------------------------------------------------
// A growable byte buffer for the header, little-endian writers

typedef struct {
    unsigned char *p;
    size_t n, cap;
    uint64_t n_kv;   /* key/values written, patched into the header */
    int failed;
} Buf;

static void put_bytes(Buf *b, const void *src, size_t n)
{
    if (b->failed) {
        return;
    }
    unsigned char *p = n > SIZE_MAX - b->n ? NULL : grow(b->p, &b->cap, b->n + n, 1);
    if (!p) {
        b->failed = 1;
        return;
    }
    b->p = p;
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_le(Buf *b, uint64_t x, int nbytes)
{
    unsigned char t[8];
    for (int i = 0; i < nbytes; i++) {
        t[i] = (unsigned char)(x >> (8 * i));
    }
    put_bytes(b, t, (size_t)nbytes);
}

static void put_u32(Buf *b, uint32_t x) { put_le(b, x, 4); }
static void put_u64(Buf *b, uint64_t x) { put_le(b, x, 8); }

static void put_str(Buf *b, const char *s)
{
    size_t n = strlen(s);
    put_u64(b, n);
    put_bytes(b, s, n);
}

/* key/value helpers, one per GGUF type used */
/* Every key/value starts with its key; count them here for the header. */
static void put_key(Buf *b, const char *k)
{
    put_str(b, k);
    b->n_kv++;
}

static void kv_str(Buf *b, const char *k, const char *v)   { put_key(b, k); put_u32(b, GV_STRING); put_str(b, v); }
static void kv_u32(Buf *b, const char *k, uint32_t v)      { put_key(b, k); put_u32(b, GV_UINT32); put_u32(b, v); }
static void kv_f32(Buf *b, const char *k, uint32_t bits)   { put_key(b, k); put_u32(b, GV_FLOAT32); put_u32(b, bits); }
static void kv_bool(Buf *b, const char *k, int v)          { put_key(b, k); put_u32(b, GV_BOOL); put_le(b, v ? 1 : 0, 1); }

static void kv_str_array(Buf *b, const char *k, char *const *items, size_t n)
{
    put_key(b, k);
    put_u32(b, GV_ARRAY);
    put_u32(b, GV_STRING);
    put_u64(b, n);
    for (size_t i = 0; i < n; i++) {
        put_str(b, items[i]);
    }
}

static void kv_i32_array(Buf *b, const char *k, const int32_t *items, size_t n)
{
    put_key(b, k);
    put_u32(b, GV_ARRAY);
    put_u32(b, GV_INT32);
    put_u64(b, n);
    for (size_t i = 0; i < n; i++) {
        put_u32(b, (uint32_t)items[i]);
    }
}

// ---------------------------------------------------------------------------
// Tensors

/* How a tensor's values are drawn:
 *   FILL_MATRIX  F16, bell * 2^-param (std 591 * 2^-param)
 *   FILL_EMBD    as FILL_MATRIX, but the rows of byte tokens a reader would
 *                not want in an answer get 2^-QUIET_SHIFT of the scale
 *   FILL_NORM    F32, param + bell * 2^-13 (param +- 0.25, like synth's
 *                1 + 0.1 * normal) */
enum { FILL_MATRIX, FILL_EMBD, FILL_NORM };

typedef struct {
    char name[48];
    int n_dims;
    uint64_t ne[2];      /* ne[0] is the row length, as in ggml */
    uint32_t type;
    int fill;
    int param;
    uint64_t offset;     /* from the start of the data section */
} Tensor;

#define MAX_TENSORS (2 + 11 * N_LAYER)

/* Scale choices, found by serving the model in llama-server b11669 with
 * temperature 0 (see docs/modules/demo_model.md):
 *   EMBD_SHIFT 12   embedding std 0.14. The output is tied to the embedding,
 *                   so the last token's own row in the residual stream votes
 *                   for itself; at std 1 (synth's untied choice) every answer
 *                   was one repeated token, at 0.14 the layers outvote it.
 *   QK_NORM    2    q/k norm weights near 2: sharper attention, so the answer
 *                   depends on where the context's tokens are; near 1 the
 *                   answers fell into cycles of one to three tokens.
 *   QUIET_SHIFT 3   byte tokens other than printable ASCII and newline get
 *                   1/8 of the embedding scale, so answers rarely hold raw
 *                   control bytes or broken UTF-8 pieces. */
#define EMBD_SHIFT  12
#define QK_NORM     2
#define QUIET_SHIFT 3

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static uint64_t tensor_elems(const Tensor *t)
{
    return t->ne[0] * (t->n_dims > 1 ? t->ne[1] : 1);
}

static uint64_t tensor_bytes(const Tensor *t)
{
    return tensor_elems(t) * (t->type == GT_F16 ? 2u : 4u);
}

static void add_tensor(Tensor *ts, int *n, const char *name, uint64_t ne0, uint64_t ne1, int fill, int param)
{
    Tensor *t = &ts[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->type = fill == FILL_NORM ? GT_F32 : GT_F16;
    t->fill = fill;
    t->param = param;
}

/* The tensor list in gguf-py order (as synth_model.py adds them), with data
 * offsets. Matrix shifts follow fan-in: 2^-13 gives std 0.072 for fan-in 256
 * (1/16 = 0.0625), 2^-14 gives 0.036 for fan-in 768 (1/sqrt(768) = 0.036). */
static int plan_tensors(Tensor *ts, uint64_t n_vocab)
{
    int n = 0;
    char name[48];
    add_tensor(ts, &n, "token_embd.weight", N_EMBD, n_vocab, FILL_EMBD, EMBD_SHIFT);
    for (int i = 0; i < N_LAYER; i++) {
#define T(suffix, ne0, ne1, fill, param) \
        (snprintf(name, sizeof name, "blk.%d." suffix, i), add_tensor(ts, &n, name, ne0, ne1, fill, param))
        T("attn_norm.weight",   N_EMBD, 0, FILL_NORM, 1);
        T("attn_q.weight",      N_EMBD, N_HEAD * HEAD_DIM, FILL_MATRIX, 13);
        T("attn_k.weight",      N_EMBD, N_HEAD_KV * HEAD_DIM, FILL_MATRIX, 13);
        T("attn_v.weight",      N_EMBD, N_HEAD_KV * HEAD_DIM, FILL_MATRIX, 13);
        T("attn_output.weight", N_HEAD * HEAD_DIM, N_EMBD, FILL_MATRIX, 13);
        T("attn_q_norm.weight", HEAD_DIM, 0, FILL_NORM, QK_NORM);
        T("attn_k_norm.weight", HEAD_DIM, 0, FILL_NORM, QK_NORM);
        T("ffn_norm.weight",    N_EMBD, 0, FILL_NORM, 1);
        T("ffn_gate.weight",    N_EMBD, N_FF, FILL_MATRIX, 13);
        T("ffn_up.weight",      N_EMBD, N_FF, FILL_MATRIX, 13);
        T("ffn_down.weight",    N_FF, N_EMBD, FILL_MATRIX, 14);
#undef T
    }
    add_tensor(ts, &n, "output_norm.weight", N_EMBD, 0, FILL_NORM, 1);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        ts[i].offset = off;
        off += pad_to(tensor_bytes(&ts[i]), ALIGNMENT);
    }
    return n;
}

/* Byte tokens worth seeing in an answer: printable ASCII and newline. */
static int byte_is_loud(uint64_t b)
{
    return (b >= 0x20 && b <= 0x7e) || b == '\n';
}

/* Draws one tensor's values and writes them, little-endian. Each value is an
 * integer converted to float (exact, |x| < 2^24) times a power of two
 * (exact): one rounding-free multiply, nothing to contract. */
static int write_tensor_data(FILE *f, const Tensor *t, uint64_t *rng)
{
    uint64_t n = tensor_elems(t);
    unsigned char out[4];
    if (t->fill == FILL_NORM) {
        const float scale = pow2_neg(13);
        for (uint64_t i = 0; i < n; i++) {
            float v = (float)(t->param * 8192 + rng_bell(rng)) * scale;
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            for (int k = 0; k < 4; k++) {
                out[k] = (unsigned char)(bits >> (8 * k));
            }
            if (fwrite(out, 1, 4, f) != 4) {
                return -1;
            }
        }
    } else {
        const float loud = pow2_neg(t->param);
        const float quiet = pow2_neg(t->param + QUIET_SHIFT);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t row = i / t->ne[0];
            int is_quiet = t->fill == FILL_EMBD && row < 256 && !byte_is_loud(row);
            float v = (float)rng_bell(rng) * (is_quiet ? quiet : loud);
            uint16_t h = f32_to_f16(v);
            out[0] = (unsigned char)h;
            out[1] = (unsigned char)(h >> 8);
            if (fwrite(out, 1, 2, f) != 2) {
                return -1;
            }
        }
    }
    static const unsigned char zeros[ALIGNMENT];
    uint64_t bytes = tensor_bytes(t);
    size_t pad = (size_t)(pad_to(bytes, ALIGNMENT) - bytes);
    return fwrite(zeros, 1, pad, f) == pad ? 0 : -1;
}

// ---------------------------------------------------------------------------
// The file

static int write_model(const char *path, char *err, size_t errlen)
{
    Vocab v = { 0 };
    Buf b = { 0 };
    Tensor ts[MAX_TENSORS];
    FILE *f = NULL;
    int rc = -1;
    char tmp[4096];

    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, errlen, "output path too long");
        return -1;
    }
    if (build_vocab(&v) != 0) {
        snprintf(err, errlen, "out of memory building the vocabulary");
        goto done;
    }
    int n_tensors = plan_tensors(ts, v.n);

    /* header */
    put_le(&b, 0x46554747u, 4);                 /* "GGUF" */
    put_u32(&b, 3);
    put_u64(&b, (uint64_t)n_tensors);
    size_t n_kv_at = b.n;
    put_u64(&b, 0);                             /* key/value count, patched below */

    kv_str(&b, "general.architecture", "qwen3");
    kv_str(&b, "general.name", "bankml-demo");
    kv_u32(&b, "general.alignment", ALIGNMENT);
    kv_u32(&b, "qwen3.context_length", N_CTX);
    kv_u32(&b, "qwen3.embedding_length", N_EMBD);
    kv_u32(&b, "qwen3.block_count", N_LAYER);
    kv_u32(&b, "qwen3.feed_forward_length", N_FF);
    kv_u32(&b, "qwen3.attention.head_count", N_HEAD);
    kv_u32(&b, "qwen3.attention.head_count_kv", N_HEAD_KV);
    kv_f32(&b, "qwen3.rope.freq_base", BITS_ROPE_BASE);
    kv_f32(&b, "qwen3.attention.layer_norm_rms_epsilon", BITS_RMS_EPS);
    kv_u32(&b, "qwen3.attention.key_length", HEAD_DIM);
    kv_u32(&b, "qwen3.attention.value_length", HEAD_DIM);
    kv_u32(&b, "general.file_type", 1);         /* MOSTLY_F16 */
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "qwen2");
    kv_str_array(&b, "tokenizer.ggml.tokens", v.tok, v.n);
    kv_i32_array(&b, "tokenizer.ggml.token_type", v.type, v.n);
    kv_str_array(&b, "tokenizer.ggml.merges", v.merge, v.n_merge);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", (uint32_t)v.n_normal);      /* <|endoftext|> */
    kv_u32(&b, "tokenizer.ggml.eos_token_id", (uint32_t)v.n_normal + 2);  /* <|im_end|> */
    kv_u32(&b, "tokenizer.ggml.padding_token_id", (uint32_t)v.n_normal);  /* <|endoftext|> */
    kv_bool(&b, "tokenizer.ggml.add_bos_token", 0);
    kv_str(&b, "tokenizer.chat_template", CHATML);

    for (int i = 0; i < n_tensors; i++) {
        put_str(&b, ts[i].name);
        put_u32(&b, (uint32_t)ts[i].n_dims);
        for (int d = 0; d < ts[i].n_dims; d++) {
            put_u64(&b, ts[i].ne[d]);
        }
        put_u32(&b, ts[i].type);
        put_u64(&b, ts[i].offset);
    }
    if (!b.failed) {
        for (int k = 0; k < 8; k++) {
            b.p[n_kv_at + (size_t)k] = (unsigned char)(b.n_kv >> (8 * k));
        }
    }
    static const unsigned char zeros[ALIGNMENT];
    put_bytes(&b, zeros, (size_t)(pad_to(b.n, ALIGNMENT) - b.n));
    if (b.failed) {
        snprintf(err, errlen, "out of memory building the header");
        goto done;
    }

    f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot create %.200s: %.60s", tmp, strerror(errno));
        goto done;
    }
    int ok = fwrite(b.p, 1, b.n, f) == b.n;
    uint64_t rng = SEED;
    for (int i = 0; ok && i < n_tensors; i++) {
        ok = write_tensor_data(f, &ts[i], &rng) == 0;
    }
    if (fclose(f) != 0) {
        ok = 0;
    }
    f = NULL;
    if (!ok) {
        snprintf(err, errlen, "cannot write %.200s: %.60s", tmp, strerror(errno));
        remove(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename %.200s to %.200s: %.60s", tmp, path, strerror(errno));
        remove(tmp);
        goto done;
    }
    printf("%s: %zu tokens (%zu merges), %d tensors\n", path, v.n, v.n_merge, n_tensors);
    rc = 0;
done:
    free(b.p);
    free_vocab(&v);
    return rc;
}

int main(int argc, char **argv)
{
    char err[512];
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.gguf\n", argv[0]);
        return 2;
    }
    if (f16_selftest() != 0) {
        fprintf(stderr, "demo-model: the F16 converter failed its self-test\n");
        return 1;
    }
    if (write_model(argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "demo-model: %s\n", err);
        return 1;
    }
    return 0;
}
