/*
 * sampler.c -- llama-server b11669's sampler chain (see sampler.h).
 *
 * Everything here is a re-statement of what llama.cpp's src/llama-sampler.cpp,
 * common/sampling.cpp and tools/server/server-schema.cpp compute, written for
 * the same float results: every expression keeps llama.cpp's operand types
 * and order (float where it is float, double where it promotes), no fused
 * multiply-add (libllama is built for baseline x86-64), and the sorts are
 * libstdc++'s algorithms step for step, because the order they leave equal
 * logits in decides which token a draw lands on.
 */
#pragma GCC optimize("fp-contract=off")

#include "base/base.h"
#ifndef SAMPLER_NO_GGUF     /* the kit build (testing/kit_sampler.c) leaves GGUF reading out */
#include "file/gguf.h"
#endif
#include "sampling/sampler.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ====================================================================== */
/* std::mt19937 and libstdc++'s distributions                             */
/* ====================================================================== */

/* The standard's seeding recurrence (std::mt19937(seed) and .seed(seed)). */
void smp_mt_seed(smp_mt19937 *g, uint32_t seed) {
    g->mt[0] = seed;
    for (uint32_t i = 1; i < 624; i++) {
        uint32_t x = g->mt[i - 1];
        g->mt[i] = 1812433253u * (x ^ (x >> 30)) + i;
    }
    g->idx = 624;
}

/* One output: regenerate the 624 words when used up, then temper. */
uint32_t smp_mt_next(smp_mt19937 *g) {
    if (g->idx >= 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (g->mt[i] & 0x80000000u) | (g->mt[(i + 1) % 624] & 0x7fffffffu);
            uint32_t v = g->mt[(i + 397) % 624] ^ (y >> 1);
            if (y & 1u) v ^= 0x9908b0dfu;
            g->mt[i] = v;
        }
        g->idx = 0;
    }
    uint32_t y = g->mt[g->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* generate_canonical<double, 53>: two 32-bit outputs, the first the low
 * word, summed in double (one rounding), divided by 2^64; a result of 1
 * becomes the largest double below 1. */
double smp_uniform_double(smp_mt19937 *g) {
    double sum = (double)smp_mt_next(g);
    double tmp = 4294967296.0;
    sum += (double)smp_mt_next(g) * tmp;
    tmp *= 4294967296.0;
    double r = sum / tmp;
    if (r >= 1.0) r = nextafter(1.0, 0.0);
    return r * (1.0 - 0.0) + 0.0;
}

/* generate_canonical<float, 24>: one output rounded to float, / 2^32. */
float smp_uniform_float(smp_mt19937 *g) {
    float sum = (float)smp_mt_next(g);
    float r = sum / 4294967296.0f;
    if (r >= 1.0f) r = nextafterf(1.0f, 0.0f);
    return r * (1.0f - 0.0f) + 0.0f;
}

/* ====================================================================== */
/* libstdc++'s sort algorithms                                            */
/* ====================================================================== */

/* One instantiation of libstdc++'s heap and introsort routines for element
 * type T under the strict order LESS(ctx, a, b) (a comes before b). Names
 * follow stl_heap.h / stl_algo.h so the two can be read side by side. */
#define SMP_DEFINE_SORT(P, T, CTX, LESS)                                                  \
    static void P##_push_heap(T *first, ptrdiff_t hole, ptrdiff_t top, T value, CTX ctx) { \
        ptrdiff_t parent = (hole - 1) / 2;                                                \
        while (hole > top && LESS(ctx, first[parent], value)) {                           \
            first[hole] = first[parent];                                                  \
            hole = parent;                                                                \
            parent = (hole - 1) / 2;                                                      \
        }                                                                                 \
        first[hole] = value;                                                              \
    }                                                                                     \
    static void P##_adjust_heap(T *first, ptrdiff_t hole, ptrdiff_t len, T value, CTX ctx) { \
        const ptrdiff_t top = hole;                                                       \
        ptrdiff_t second = hole;                                                          \
        while (second < (len - 1) / 2) {                                                  \
            second = 2 * (second + 1);                                                    \
            if (LESS(ctx, first[second], first[second - 1])) second--;                    \
            first[hole] = first[second];                                                  \
            hole = second;                                                                \
        }                                                                                 \
        if ((len & 1) == 0 && second == (len - 2) / 2) {                                  \
            second = 2 * (second + 1);                                                    \
            first[hole] = first[second - 1];                                              \
            hole = second - 1;                                                            \
        }                                                                                 \
        P##_push_heap(first, hole, top, value, ctx);                                      \
    }                                                                                     \
    static void P##_make_heap(T *first, T *last, CTX ctx) {                               \
        ptrdiff_t len = last - first;                                                     \
        if (len < 2) return;                                                              \
        ptrdiff_t parent = (len - 2) / 2;                                                 \
        for (;;) {                                                                        \
            T value = first[parent];                                                      \
            P##_adjust_heap(first, parent, len, value, ctx);                              \
            if (parent == 0) return;                                                      \
            parent--;                                                                     \
        }                                                                                 \
    }                                                                                     \
    static void P##_pop_heap(T *first, T *last, T *result, CTX ctx) {                     \
        T value = *result;                                                                \
        *result = *first;                                                                 \
        P##_adjust_heap(first, 0, last - first, value, ctx);                              \
    }                                                                                     \
    static void P##_heap_select(T *first, T *middle, T *last, CTX ctx) {                  \
        P##_make_heap(first, middle, ctx);                                                \
        for (T *i = middle; i < last; ++i)                                                \
            if (LESS(ctx, *i, *first)) P##_pop_heap(first, middle, i, ctx);               \
    }                                                                                     \
    static void P##_sort_heap(T *first, T *last, CTX ctx) {                               \
        while (last - first > 1) {                                                        \
            --last;                                                                       \
            P##_pop_heap(first, last, last, ctx);                                         \
        }                                                                                 \
    }                                                                                     \
    static void P##_partial_sort(T *first, T *middle, T *last, CTX ctx) {                 \
        P##_heap_select(first, middle, last, ctx);                                        \
        P##_sort_heap(first, middle, ctx);                                                \
    }                                                                                     \
    static void P##_swap(T *a, T *b) {                                                    \
        T t = *a;                                                                         \
        *a = *b;                                                                          \
        *b = t;                                                                           \
    }                                                                                     \
    static void P##_median_to_first(T *result, T *a, T *b, T *c, CTX ctx) {               \
        if (LESS(ctx, *a, *b)) {                                                          \
            if (LESS(ctx, *b, *c)) P##_swap(result, b);                                   \
            else if (LESS(ctx, *a, *c)) P##_swap(result, c);                              \
            else P##_swap(result, a);                                                     \
        } else if (LESS(ctx, *a, *c)) P##_swap(result, a);                                \
        else if (LESS(ctx, *b, *c)) P##_swap(result, c);                                  \
        else P##_swap(result, b);                                                         \
    }                                                                                     \
    static T *P##_unguarded_partition(T *first, T *last, T *pivot, CTX ctx) {             \
        for (;;) {                                                                        \
            while (LESS(ctx, *first, *pivot)) ++first;                                    \
            --last;                                                                       \
            while (LESS(ctx, *pivot, *last)) --last;                                      \
            if (!(first < last)) return first;                                            \
            P##_swap(first, last);                                                        \
            ++first;                                                                      \
        }                                                                                 \
    }                                                                                     \
    static void P##_introsort_loop(T *first, T *last, ptrdiff_t depth, CTX ctx) {         \
        while (last - first > 16) {                                                       \
            if (depth == 0) {                                                             \
                P##_partial_sort(first, last, last, ctx);                                 \
                return;                                                                   \
            }                                                                             \
            --depth;                                                                      \
            T *mid = first + (last - first) / 2;                                          \
            P##_median_to_first(first, first + 1, mid, last - 1, ctx);                    \
            T *cut = P##_unguarded_partition(first + 1, last, first, ctx);                \
            P##_introsort_loop(cut, last, depth, ctx);                                    \
            last = cut;                                                                   \
        }                                                                                 \
    }                                                                                     \
    static void P##_unguarded_linear_insert(T *last, CTX ctx) {                           \
        T val = *last;                                                                    \
        T *next = last - 1;                                                               \
        while (LESS(ctx, val, *next)) {                                                   \
            *last = *next;                                                                \
            last = next;                                                                  \
            --next;                                                                       \
        }                                                                                 \
        *last = val;                                                                      \
    }                                                                                     \
    static void P##_insertion_sort(T *first, T *last, CTX ctx) {                          \
        if (first == last) return;                                                        \
        for (T *i = first + 1; i != last; ++i) {                                          \
            if (LESS(ctx, *i, *first)) {                                                  \
                T val = *i;                                                               \
                memmove(first + 1, first, (size_t)(i - first) * sizeof(T));               \
                *first = val;                                                             \
            } else {                                                                      \
                P##_unguarded_linear_insert(i, ctx);                                      \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    static void P##_sort(T *first, T *last, CTX ctx) {                                    \
        if (first == last) return;                                                        \
        ptrdiff_t n = last - first;                                                       \
        ptrdiff_t lg = 63 - __builtin_clzll((unsigned long long)n);                       \
        P##_introsort_loop(first, last, lg * 2, ctx);                                     \
        if (n > 16) {                                                                     \
            P##_insertion_sort(first, first + 16, ctx);                                   \
            for (T *i = first + 16; i != last; ++i) P##_unguarded_linear_insert(i, ctx);  \
        } else {                                                                          \
            P##_insertion_sort(first, last, ctx);                                         \
        }                                                                                 \
    }

#define SMP_LOGIT_DESC(ctx, a, b) ((void)(ctx), (a).logit > (b).logit)
#define SMP_P_DESC(ctx, a, b) ((void)(ctx), (a).p > (b).p)
#define SMP_SCORE_ASC(ctx, a, b) ((ctx)[a] < (ctx)[b])

SMP_DEFINE_SORT(lg, smp_token, const void *, SMP_LOGIT_DESC)
SMP_DEFINE_SORT(pr, smp_token, const void *, SMP_P_DESC)
SMP_DEFINE_SORT(ix, size_t, const float *, SMP_SCORE_ASC)

void smp_sort_by_logit(smp_token *a, size_t n) { lg_sort(a, a + n, NULL); }
void smp_partial_sort_by_logit(smp_token *a, size_t middle, size_t n) {
    lg_partial_sort(a, a + middle, a + n, NULL);
}

/* x86's cvttss2si: truncation, with 0x80000000 for NaN and anything out of
 * int range (what `int(float)` compiles to in libllama). */
static int cvt_f32_i32(float x) {
    if (x >= -2147483648.0f && x < 2147483648.0f) return (int)x;
    return INT_MIN;
}

/* ====================================================================== */
/* the candidate array and llama.cpp's sorting helpers                    */
/* ====================================================================== */

/* llama_token_data_array: data points into the sampler's buffer (XTC moves
 * it forward), size, selected, sorted. */
typedef struct {
    smp_token *data;
    size_t size;
    int64_t selected;
    int sorted;
} smp_array;

typedef struct {
    smp_token *buf;     /* scratch for the bucket sort */
    size_t cap;
    int *bucket;        /* per-candidate bucket index */
    size_t bucket_cap;
} smp_scratch;

static int scratch_reserve(smp_scratch *sc, size_t n) {
    if (n > sc->cap) {
        smp_token *b = realloc(sc->buf, n * sizeof *b);
        if (!b) return -1;
        sc->buf = b;
        sc->cap = n;
    }
    if (n > sc->bucket_cap) {
        int *b = realloc(sc->bucket, n * sizeof *b);
        if (!b) return -1;
        sc->bucket = b;
        sc->bucket_cap = n;
    }
    return 0;
}

/* llama_token_data_array_partial_sort: the top npartial candidates of cur
 * by logit into sc->buf (which then holds nhave >= npartial sorted-enough
 * entries). Logits go to 128 buckets over [-10, 10] (everything outside,
 * NaN and both infinities included, clamps into the end buckets exactly as
 * int() truncates); the buckets above the one that completes npartial are
 * each sorted with std::sort, that last one partially with
 * std::partial_sort. Returns nhave. */
static size_t bucket_partial_sort(const smp_array *cur, size_t npartial, smp_scratch *sc) {
    enum { NB = 128 };
    const float scale = 128 / (10.0f - -10.0f);
    const float inter = -(-10.0f) * scale;
    int histo[NB] = {0};
    int *idx = sc->bucket;
    for (size_t i = 0; i < cur->size; i++) {
        float v = scale * cur->data[i].logit + inter;
        int ib = cvt_f32_i32(v);
        if (ib > NB - 1) ib = NB - 1;
        if (ib < 0) ib = 0;
        idx[i] = ib;
        histo[ib]++;
    }
    size_t nhave = 0;
    int ib = NB - 1;
    for (; ib >= 0; --ib) {
        nhave += (size_t)histo[ib];
        if (nhave >= npartial) break;
    }
    if (ib < 0) ib = 0;     /* unreachable for npartial <= size */
    smp_token *ptrs[NB];
    smp_token *ptr = sc->buf;
    for (int j = NB - 1; j >= ib; --j) {
        ptrs[NB - 1 - j] = ptr;
        ptr += histo[j];
    }
    for (size_t i = 0; i < cur->size; i++) {
        int j = idx[i];
        if (j >= ib) *ptrs[NB - 1 - j]++ = cur->data[i];
    }
    ptr = sc->buf;
    size_t ndone = 0;
    for (int j = NB - 1; j > ib; --j) {
        lg_sort(ptr, ptr + histo[j], NULL);
        ptr += histo[j];
        ndone += (size_t)histo[j];
    }
    lg_partial_sort(ptr, ptr + (npartial - ndone), ptr + histo[ib], NULL);
    return nhave;
}

/* llama_token_data_array_partial_sort_inplace: keep the top npartial,
 * sorted (std::partial_sort up to 128, the bucket sort above). */
static void partial_sort_inplace(smp_array *cur, size_t npartial, smp_scratch *sc) {
    if (npartial <= 128) {
        lg_partial_sort(cur->data, cur->data + npartial, cur->data + cur->size, NULL);
    } else {
        bucket_partial_sort(cur, npartial, sc);
        memcpy(cur->data, sc->buf, npartial * sizeof *cur->data);
    }
    cur->size = npartial;
    cur->sorted = 1;
}

/* std::max(a, b) for floats is `a < b ? b : a`; fmaxf differs only on NaN,
 * where we must keep std::max's answer. */
static float stdmax(float a, float b) { return a < b ? b : a; }

/* llama_sampler_softmax_impl: p = expf(logit - max) / float sum, sorting
 * first when asked and not sorted. */
static void softmax(smp_array *cur, int do_sort, smp_scratch *sc) {
    if (cur->size == 0) return;
    if (do_sort && !cur->sorted) partial_sort_inplace(cur, cur->size, sc);
    float max_l = cur->data[0].logit;
    if (!cur->sorted)
        for (size_t i = 1; i < cur->size; i++) max_l = stdmax(max_l, cur->data[i].logit);
    float sum = 0.0f;
    for (size_t i = 0; i < cur->size; i++) {
        float p = expf(cur->data[i].logit - max_l);
        cur->data[i].p = p;
        sum += p;
    }
    for (size_t i = 0; i < cur->size; i++) cur->data[i].p /= sum;
}

/* ====================================================================== */
/* parameters                                                             */
/* ====================================================================== */

static const uint8_t default_order[] = {
    SMP_PENALTIES, SMP_DRY, SMP_TOP_N_SIGMA, SMP_TOP_K, SMP_TYPICAL_P,
    SMP_TOP_P, SMP_MIN_P, SMP_XTC, SMP_TEMPERATURE
};

static int set_breakers(sampler_params *p, const char *const *b, const size_t *lens, size_t n) {
    char **nb = n ? calloc(n, sizeof *nb) : NULL;
    size_t *nl = n ? calloc(n, sizeof *nl) : NULL;
    if (n && (!nb || !nl)) {
        free(nb);
        free(nl);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        nb[i] = malloc(lens[i] + 1);
        if (!nb[i]) {
            for (size_t j = 0; j < i; j++) free(nb[j]);
            free(nb);
            free(nl);
            return -1;
        }
        memcpy(nb[i], b[i], lens[i]);
        nb[i][lens[i]] = 0;
        nl[i] = lens[i];
    }
    for (size_t i = 0; i < p->n_dry_breakers; i++) free(p->dry_breakers[i]);
    free(p->dry_breakers);
    free(p->dry_breaker_lens);
    p->dry_breakers = nb;
    p->dry_breaker_lens = nl;
    p->n_dry_breakers = n;
    return 0;
}

int sampler_params_init(sampler_params *p) {
    memset(p, 0, sizeof *p);
    p->seed = SAMPLER_RANDOM_SEED;
    p->n_probs = 0;
    p->min_keep = 0;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->xtc_probability = 0.00f;
    p->xtc_threshold = 0.10f;
    p->typ_p = 1.00f;
    p->temp = 0.80f;
    p->dynatemp_range = 0.00f;
    p->dynatemp_exponent = 1.00f;
    p->penalty_last_n = 64;
    p->penalty_repeat = 1.00f;
    p->penalty_freq = 0.00f;
    p->penalty_present = 0.00f;
    p->dry_multiplier = 0.0f;
    p->dry_base = 1.75f;
    p->dry_allowed_length = 2;
    p->dry_penalty_last_n = 64;
    p->mirostat = 0;
    p->mirostat_tau = 5.00f;
    p->mirostat_eta = 0.10f;
    p->top_n_sigma = -1.00f;
    p->adaptive_target = -1.0f;
    p->adaptive_decay = 0.90f;
    memcpy(p->order, default_order, sizeof default_order);
    p->n_order = sizeof default_order;
    static const char *const br[] = {"\n", ":", "\"", "*"};
    static const size_t bl[] = {1, 1, 1, 1};
    return set_breakers(p, br, bl, 4);
}

void sampler_params_no_breakers(sampler_params *p) {
    for (size_t i = 0; i < p->n_dry_breakers; i++) free(p->dry_breakers[i]);
    free(p->dry_breakers);
    free(p->dry_breaker_lens);
    p->dry_breakers = NULL;
    p->dry_breaker_lens = NULL;
    p->n_dry_breakers = 0;
}

void sampler_params_free(sampler_params *p) {
    if (p) sampler_params_no_breakers(p);   /* the breakers are all it owns */
}

int sampler_params_copy(sampler_params *dst, const sampler_params *src) {
    *dst = *src;
    dst->dry_breakers = NULL;
    dst->dry_breaker_lens = NULL;
    dst->n_dry_breakers = 0;
    return set_breakers(dst, (const char *const *)src->dry_breakers, src->dry_breaker_lens,
                        src->n_dry_breakers);
}

/* common_sampler_types_from_names's table: canonical names, their kebab and
 * no-underscore spellings, and three aliases. Names compare lowercased. */
static int sampler_by_name(const char *s, size_t n) {
    static const struct { const char *name; uint8_t type; } names[] = {
        {"dry", SMP_DRY}, {"top_k", SMP_TOP_K}, {"top_p", SMP_TOP_P},
        {"top_n_sigma", SMP_TOP_N_SIGMA}, {"typ_p", SMP_TYPICAL_P}, {"min_p", SMP_MIN_P},
        {"temperature", SMP_TEMPERATURE}, {"xtc", SMP_XTC}, {"infill", SMP_INFILL},
        {"penalties", SMP_PENALTIES}, {"adaptive_p", SMP_ADAPTIVE_P},
        {"top-k", SMP_TOP_K}, {"top-p", SMP_TOP_P}, {"top-n-sigma", SMP_TOP_N_SIGMA},
        {"typ-p", SMP_TYPICAL_P}, {"min-p", SMP_MIN_P}, {"adaptive-p", SMP_ADAPTIVE_P},
        {"topk", SMP_TOP_K}, {"topp", SMP_TOP_P}, {"topnsigma", SMP_TOP_N_SIGMA},
        {"typp", SMP_TYPICAL_P}, {"minp", SMP_MIN_P}, {"adaptivep", SMP_ADAPTIVE_P},
        {"nucleus", SMP_TOP_P}, {"temp", SMP_TEMPERATURE}, {"typ", SMP_TYPICAL_P},
    };
    char low[32];
    if (n >= sizeof low) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        low[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    low[n] = 0;
    if (strlen(low) != n) return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i].name, low)) return names[i].type;
    return 0;
}

static int sampler_by_char(char c) {
    switch (c) {
    case 'd': return SMP_DRY;
    case 'k': return SMP_TOP_K;
    case 'y': return SMP_TYPICAL_P;
    case 'p': return SMP_TOP_P;
    case 's': return SMP_TOP_N_SIGMA;
    case 'm': return SMP_MIN_P;
    case 't': return SMP_TEMPERATURE;
    case 'x': return SMP_XTC;
    case 'i': return SMP_INFILL;
    case 'e': return SMP_PENALTIES;
    case 'a': return SMP_ADAPTIVE_P;
    default: return 0;
    }
}

static void order_push(sampler_params *p, int t) {
    if (t && p->n_order < SAMPLER_MAX_ORDER) p->order[p->n_order++] = (uint8_t)t;
}

static int order_is_default(const sampler_params *p) {
    return p->n_order == sizeof default_order &&
           !memcmp(p->order, default_order, sizeof default_order);
}

#ifndef SAMPLER_NO_GGUF
/* gguf_kv_to_str for a scalar (std::to_string per type), into buf as
 * llama_model_meta_val_str copies it (snprintf, so cut at buf's size). */
static int gguf_meta_str(const gguf_kv *kv, char *buf, size_t n) {
    switch (kv->type) {
    case GGUF_VT_U8: case GGUF_VT_U16: case GGUF_VT_U32: case GGUF_VT_U64:
        snprintf(buf, n, "%llu", (unsigned long long)kv->u);
        return 1;
    case GGUF_VT_I8: case GGUF_VT_I16: case GGUF_VT_I32: case GGUF_VT_I64:
        snprintf(buf, n, "%lld", (long long)kv->i);
        return 1;
    case GGUF_VT_F32: case GGUF_VT_F64:
        snprintf(buf, n, "%f", kv->f);
        return 1;
    case GGUF_VT_BOOL:
        snprintf(buf, n, "%s", kv->u ? "true" : "false");
        return 1;
    case GGUF_VT_STRING:
        snprintf(buf, n, "%s", kv->str);
        return 1;
    default:
        return 0;   /* arrays: llama.cpp renders "[...]", which never parses as a number */
    }
}

static void gguf_int(const gguf_header *h, const char *key, int32_t *dst) {
    char buf[64];
    const gguf_kv *kv = gguf_kv_find(h, key);
    if (!kv || !gguf_meta_str(kv, buf, sizeof buf)) return;
    char *end = NULL;
    long v = strtol(buf, &end, 10);
    if (end && end != buf) *dst = (int32_t)(uint32_t)(unsigned long)v;
}

static void gguf_float(const gguf_header *h, const char *key, float *dst) {
    char buf[128];
    const gguf_kv *kv = gguf_kv_find(h, key);
    if (!kv || !gguf_meta_str(kv, buf, sizeof buf)) return;
    char *end = NULL;
    float v = strtof(buf, &end);
    if (end && end != buf) *dst = v;
}

int sampler_gguf_defaults(sampler_params *p, const gguf_header *h, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    char buf[512];
    const gguf_kv *kv = gguf_kv_find(h, "general.sampling.sequence");
    if (kv && gguf_meta_str(kv, buf, sizeof buf) && buf[0]) {
        /* string_split on ';' then the name table; an empty result keeps the default */
        sampler_params q = *p;
        q.n_order = 0;
        const char *s = buf;
        for (;;) {
            const char *e = strchr(s, ';');
            size_t n = e ? (size_t)(e - s) : strlen(s);
            order_push(&q, sampler_by_name(s, n));
            if (!e) break;
            s = e + 1;
        }
        /* llama.cpp replaces the order whenever the split list is non-empty
         * (always: splitting yields at least one piece), names or not */
        memcpy(p->order, q.order, sizeof q.order);
        p->n_order = q.n_order;
        p->order_from_gguf = 1;
    }
    gguf_int(h, "general.sampling.top_k", &p->top_k);
    gguf_float(h, "general.sampling.top_p", &p->top_p);
    gguf_float(h, "general.sampling.min_p", &p->min_p);
    gguf_float(h, "general.sampling.xtc_probability", &p->xtc_probability);
    gguf_float(h, "general.sampling.xtc_threshold", &p->xtc_threshold);
    gguf_float(h, "general.sampling.temp", &p->temp);
    gguf_int(h, "general.sampling.penalty_last_n", &p->penalty_last_n);
    gguf_float(h, "general.sampling.penalty_repeat", &p->penalty_repeat);
    gguf_int(h, "general.sampling.mirostat", &p->mirostat);
    gguf_float(h, "general.sampling.mirostat_tau", &p->mirostat_tau);
    gguf_float(h, "general.sampling.mirostat_eta", &p->mirostat_eta);
    return 0;
}

#endif

/* ---- request fields, as nlohmann::json's get<T>() converts them ---- */

/* A JSON number as nlohmann stores it: an integer literal (no '.', 'e',
 * 'E') is int64 when negative, uint64 otherwise, a float when it overflows
 * those. */
typedef struct {
    int kind;           /* 0 int64, 1 uint64, 2 double */
    int64_t i;
    uint64_t u;
    double d;
} jnum;

static const char *jtype_name(const json_value *v) {
    switch (v->type) {
    case JSON_NULL: return "null";
    case JSON_FALSE: case JSON_TRUE: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    default: return "object";
    }
}

/* get_arithmetic_value: numbers and booleans; anything else is
 * type_error 302. Returns 0 or -1 with the message's tail in err. */
static int jnum_of(const json_value *v, jnum *out, char *err, size_t errlen) {
    if (v->type == JSON_TRUE || v->type == JSON_FALSE) {
        out->kind = 0;
        out->i = v->type == JSON_TRUE;
        return 0;
    }
    if (v->type != JSON_NUMBER) {
        bk_err(err, errlen, "[json.exception.type_error.302] type must be number, but is %s",
               jtype_name(v));
        return -1;
    }
    const char *s = v->str;
    int is_int = !strpbrk(s, ".eE");
    if (is_int) {
        errno = 0;
        char *end;
        if (s[0] == '-') {
            long long x = strtoll(s, &end, 10);
            if (errno == 0 && *end == 0) {
                out->kind = 0;
                out->i = x;
                return 0;
            }
        } else {
            unsigned long long x = strtoull(s, &end, 10);
            if (errno == 0 && *end == 0) {
                out->kind = 1;
                out->u = x;
                return 0;
            }
        }
    }
    out->kind = 2;
    out->d = strtod(s, NULL);
    return 0;
}

/* static_cast<int32_t>: integers wrap; a double truncates, and one out of
 * range becomes INT_MIN (cvttsd2si). */
static int32_t jnum_i32(const jnum *n) {
    if (n->kind == 0) return (int32_t)(uint32_t)(uint64_t)n->i;
    if (n->kind == 1) return (int32_t)(uint32_t)n->u;
    if (n->d > -2147483649.0 && n->d < 2147483648.0) return (int32_t)n->d;
    return INT32_MIN;
}

/* static_cast<uint32_t>: gcc converts a double through int64 (cvttsd2si
 * with a 64-bit result; out of range 0x8000000000000000) and keeps the low
 * word. */
static uint32_t jnum_u32(const jnum *n) {
    if (n->kind == 0) return (uint32_t)(uint64_t)n->i;
    if (n->kind == 1) return (uint32_t)n->u;
    if (n->d > -9223372036854775809.0 && n->d < 9223372036854775808.0)
        return (uint32_t)(uint64_t)(int64_t)n->d;
    return 0;
}

static float jnum_f32(const jnum *n) {
    if (n->kind == 0) return (float)n->i;
    if (n->kind == 1) return (float)n->u;
    return (float)n->d;
}

/* has_value: present and not null */
static const json_value *field(const json_value *req, const char *name) {
    const json_value *v = json_get(req, name);
    return v && v->type != JSON_NULL ? v : NULL;
}

/* field_num<int32_t> with soft limits (clamp) or hard ones (refuse). */
static int num_i32(const json_value *req, const char *name, const char *alias, int32_t *val,
                   int32_t lo, int32_t hi, int hard, char *err, size_t errlen) {
    const json_value *v = field(req, name);
    const char *used = name;
    if (!v && alias) {
        v = field(req, alias);
        used = alias;
    }
    if (!v) return 0;
    jnum n;
    char tail[200];
    if (jnum_of(v, &n, tail, sizeof tail)) {
        bk_err(err, errlen, "Field '%s': %s", used, tail);
        return -1;
    }
    int32_t x = jnum_i32(&n);
    if (hard) {
        if (x < lo || x > hi) {
            bk_err(err, errlen, "Field '%s': Value must be between %d <= value <= %d, but got %d",
                   used, lo, hi, x);
            return -1;
        }
        *val = x;
    } else {
        *val = x > hi ? hi : x;
        if (*val < lo) *val = lo;
    }
    return 0;
}

/* field_num<float>: std::max(min, std::min(max, v)); every float field
 * without limits is clamped to [-FLT_MAX, FLT_MAX], so no infinity passes. */
static int num_f32(const json_value *req, const char *name, float *val, float lo, float hi,
                   int hard, char *err, size_t errlen) {
    const json_value *v = field(req, name);
    if (!v) return 0;
    jnum n;
    char tail[200];
    if (jnum_of(v, &n, tail, sizeof tail)) {
        bk_err(err, errlen, "Field '%s': %s", name, tail);
        return -1;
    }
    float x = jnum_f32(&n);
    if (hard) {
        if (x < lo || x > hi) {
            bk_err(err, errlen, "Field '%s': Value must be between %f <= value <= %f, but got %f",
                   name, (double)lo, (double)hi, (double)x);
            return -1;
        }
        *val = x;
    } else {
        float m = hi < x ? hi : x;     /* std::min(max, v) */
        *val = m < lo ? lo : m;        /* std::max(min, .) */
    }
    return 0;
}

int sampler_check(const sampler_params *p, char *err, size_t errlen) {
    if (!isfinite(p->penalty_repeat) || p->penalty_repeat <= 0.0f ||
        !isfinite(1.0f / p->penalty_repeat)) {
        bk_err(err, errlen, "Failed to initialize samplers: penalty_repeat must be finite and greater than 0");
        return -1;
    }
    if (!isfinite(p->penalty_freq)) {
        bk_err(err, errlen, "Failed to initialize samplers: penalty_freq must be finite");
        return -1;
    }
    if (!isfinite(p->penalty_present)) {
        bk_err(err, errlen, "Failed to initialize samplers: penalty_present must be finite");
        return -1;
    }
    if (p->mirostat != 0) {
        bk_err(err, errlen, "mirostat: not reproduced; bankML reproduces llama-server's default sampler chain");
        return -1;
    }
    if (!order_is_default(p)) {
        bk_err(err, errlen, "%s: a custom sampler order is not reproduced; bankML runs llama-server's "
               "default order (penalties, dry, top-n-σ, top-k, typical-p, top-p, min-p, xtc, temperature)",
               p->order_from_gguf ? "general.sampling.sequence" : "samplers");
        return -1;
    }
    return 0;
}

int sampler_resolve(sampler_params *o, const sampler_params *d, const json_value *req,
                    char *err, size_t errlen) {
    if (sampler_params_copy(o, d)) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    if (!req || req->type != JSON_OBJECT) return sampler_check(o, err, errlen);
    const float F = FLT_MAX;
    if (num_i32(req, "top_k", NULL, &o->top_k, 0, INT32_MAX, 0, err, errlen) ||
        num_f32(req, "top_p", &o->top_p, 0.0f, 1.0f, 0, err, errlen) ||
        num_f32(req, "min_p", &o->min_p, 0.0f, 1.0f, 0, err, errlen) ||
        num_f32(req, "top_n_sigma", &o->top_n_sigma, -F, F, 0, err, errlen) ||
        num_f32(req, "xtc_probability", &o->xtc_probability, 0.0f, 1.0f, 0, err, errlen) ||
        num_f32(req, "xtc_threshold", &o->xtc_threshold, 0.0f, 1.0f, 0, err, errlen) ||
        num_f32(req, "typical_p", &o->typ_p, -F, F, 0, err, errlen) ||
        num_f32(req, "temperature", &o->temp, 0.0f, INFINITY, 0, err, errlen) ||
        num_f32(req, "dynatemp_range", &o->dynatemp_range, -F, F, 0, err, errlen) ||
        num_f32(req, "dynatemp_exponent", &o->dynatemp_exponent, -F, F, 0, err, errlen) ||
        num_i32(req, "repeat_last_n", NULL, &o->penalty_last_n, 0, INT32_MAX, 1, err, errlen) ||
        num_f32(req, "repeat_penalty", &o->penalty_repeat, -F, F, 0, err, errlen) ||
        num_f32(req, "frequency_penalty", &o->penalty_freq, -F, F, 0, err, errlen) ||
        num_f32(req, "presence_penalty", &o->penalty_present, -F, F, 0, err, errlen) ||
        num_f32(req, "dry_multiplier", &o->dry_multiplier, -F, F, 0, err, errlen))
        return -1;
    /* dry_base: its own handler, no clamp; below 1 falls back to the server's default */
    const json_value *v = field(req, "dry_base");
    if (v) {
        jnum n;
        char tail[200];
        if (jnum_of(v, &n, tail, sizeof tail)) {
            bk_err(err, errlen, "Field 'dry_base': %s", tail);
            return -1;
        }
        float x = jnum_f32(&n);
        o->dry_base = x < 1.0f ? d->dry_base : x;
    }
    if (num_i32(req, "dry_allowed_length", NULL, &o->dry_allowed_length, 0, INT32_MAX, 1, err, errlen) ||
        num_i32(req, "dry_penalty_last_n", NULL, &o->dry_penalty_last_n, 0, INT32_MAX, 1, err, errlen) ||
        num_i32(req, "mirostat", NULL, &o->mirostat, 0, 2, 0, err, errlen) ||
        num_f32(req, "mirostat_tau", &o->mirostat_tau, -F, F, 0, err, errlen) ||
        num_f32(req, "mirostat_eta", &o->mirostat_eta, -F, F, 0, err, errlen) ||
        num_f32(req, "adaptive_target", &o->adaptive_target, -F, 1.0f, 0, err, errlen) ||
        num_f32(req, "adaptive_decay", &o->adaptive_decay, 0.0f, 0.99f, 1, err, errlen))
        return -1;
    v = field(req, "seed");
    if (v) {
        jnum n;
        char tail[200];
        if (jnum_of(v, &n, tail, sizeof tail)) {
            bk_err(err, errlen, "Field 'seed': %s", tail);
            return -1;
        }
        o->seed = jnum_u32(&n);
    }
    if (num_i32(req, "n_probs", "logprobs", &o->n_probs, INT32_MIN, INT32_MAX, 0, err, errlen) ||
        num_i32(req, "min_keep", NULL, &o->min_keep, 0, INT32_MAX, 1, err, errlen))
        return -1;
    v = field(req, "post_sampling_probs");
    if (v) {
        if (v->type != JSON_TRUE && v->type != JSON_FALSE) {
            bk_err(err, errlen, "Field 'post_sampling_probs': [json.exception.type_error.302] "
                   "type must be boolean, but is %s", jtype_name(v));
            return -1;
        }
        o->post_sampling_probs = v->type == JSON_TRUE;
    }
    /* dry_sequence_breakers: json_value(..., vector<string>()) turns any
     * type error into the empty default, which is then refused */
    v = field(req, "dry_sequence_breakers");
    if (v) {
        int ok = v->type == JSON_ARRAY && v->n > 0;
        for (size_t i = 0; ok && i < v->n; i++) ok = v->items[i]->type == JSON_STRING;
        if (!ok) {
            bk_err(err, errlen, "Field 'dry_sequence_breakers': Error: dry_sequence_breakers must be a "
                   "non-empty array of strings");
            return -1;
        }
        const char **b = calloc(v->n, sizeof *b);
        size_t *l = calloc(v->n, sizeof *l);
        if (!b || !l) {
            free(b);
            free(l);
            bk_err(err, errlen, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < v->n; i++) {
            b[i] = v->items[i]->str;
            l[i] = v->items[i]->len;
        }
        int r = set_breakers(o, b, l, v->n);
        free(b);
        free(l);
        if (r) {
            bk_err(err, errlen, "out of memory");
            return -1;
        }
    }
    /* samplers: an array of names (each must be a string) or a string of
     * letters; unknown names and letters are dropped; other types ignored */
    v = field(req, "samplers");
    if (v && v->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->n; i++)
            if (v->items[i]->type != JSON_STRING) {
                bk_err(err, errlen, "Field 'samplers': [json.exception.type_error.302] type must be "
                       "string, but is %s", jtype_name(v->items[i]));
                return -1;
            }
        o->n_order = 0;
        o->order_from_gguf = 0;
        for (size_t i = 0; i < v->n; i++)
            order_push(o, sampler_by_name(v->items[i]->str, v->items[i]->len));
    } else if (v && v->type == JSON_STRING) {
        o->n_order = 0;
        o->order_from_gguf = 0;
        for (size_t i = 0; i < v->len; i++) order_push(o, sampler_by_char(v->str[i]));
    }
    return sampler_check(o, err, errlen);
}

int sampler_oai_logprobs(const json_value *body, int32_t *n_probs, int *set, char *err,
                         size_t errlen) {
    *set = 0;
    const json_value *lp = field(body, "logprobs");
    /* json_value(body, "logprobs", false): a non-boolean reads as false */
    if (lp && lp->type == JSON_TRUE) {
        int32_t n = 20;
        const json_value *t = field(body, "top_logprobs");
        jnum num;
        char tail[200];
        if (t && t->type != JSON_TRUE && t->type != JSON_FALSE && !jnum_of(t, &num, tail, sizeof tail))
            n = jnum_i32(&num);
        else if (t && (t->type == JSON_TRUE || t->type == JSON_FALSE))
            n = t->type == JSON_TRUE;
        *n_probs = n;
        *set = 1;
        return 0;
    }
    if (field(body, "top_logprobs")) {
        bk_err(err, errlen, "top_logprobs requires logprobs to be set to true");
        return -1;
    }
    return 0;
}

/* ====================================================================== */
/* the chain                                                              */
/* ====================================================================== */

/* DRY's restart sequences: for each head token a list of tails. */
typedef struct {
    int32_t next;       /* next entry of the same head, -1 at the end */
    uint32_t off, len;  /* the tail in tails[] */
} dry_entry;

struct sampler {
    sampler_params p;
    int32_t n_vocab;

    /* which samplers are live (llama.cpp builds an empty one otherwise) */
    int pen_on, dry_on, sigma_on, topk_on, typ_on, topp_on, minp_on, xtc_on, temp_on;

    sampler_bias *bias;
    size_t n_bias;

    /* history of accepted tokens since the last reset; the penalties' and
     * DRY's rings are its last penalty_last_n / dry_penalty_last_n entries */
    int32_t *hist;
    size_t n_hist, cap_hist;
    int32_t *pen_count;         /* n_vocab counts over the penalty window */

    /* DRY */
    int32_t *dry_head;          /* n_vocab: first entry, -1 none */
    dry_entry *dry_ent;
    size_t n_dry_ent, cap_dry_ent;
    int32_t *dry_tails;
    size_t n_dry_tails, cap_dry_tails;
    int *dry_repeat;            /* repeat counts over the window */
    size_t cap_dry_repeat;
    int *dry_max;               /* n_vocab: max repeat ending before the token, -1 none */
    int32_t *dry_touched;       /* ids whose dry_max is set */
    size_t n_dry_touched, cap_dry_touched;

    /* RNGs */
    smp_mt19937 rng_dist, rng_xtc;

    /* candidates */
    smp_token *cur;
    smp_array arr;
    smp_scratch sc;
    smp_token *tmp;             /* min-p's / typical's filtered copy */
    size_t *idx;                /* typical's indices */
    float *scores;              /* typical's shifted scores */
};

static uint32_t random_seed(void) {
    uint32_t s;
    if (getrandom(&s, sizeof s, 0) == (ssize_t)sizeof s) return s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

/* get_rng_seed: the seed, or a fresh random one for LLAMA_DEFAULT_SEED */
static uint32_t rng_seed(uint32_t seed) {
    return seed == SAMPLER_RANDOM_SEED ? random_seed() : seed;
}

static int dry_add(sampler *s, int32_t head, const int32_t *tail, size_t n, int dedup) {
    if (dedup) {
        for (int32_t e = s->dry_head[head]; e >= 0; e = s->dry_ent[e].next) {
            const dry_entry *d = &s->dry_ent[e];
            if (d->len == n && !memcmp(s->dry_tails + d->off, tail, n * sizeof *tail)) return 0;
        }
    }
    if (s->n_dry_ent == s->cap_dry_ent) {
        size_t c = s->cap_dry_ent ? s->cap_dry_ent * 2 : 64;
        dry_entry *e = realloc(s->dry_ent, c * sizeof *e);
        if (!e) return -1;
        s->dry_ent = e;
        s->cap_dry_ent = c;
    }
    if (s->n_dry_tails + n > s->cap_dry_tails) {
        size_t c = s->cap_dry_tails ? s->cap_dry_tails * 2 : 64;
        while (c < s->n_dry_tails + n) c *= 2;
        int32_t *t = realloc(s->dry_tails, c * sizeof *t);
        if (!t) return -1;
        s->dry_tails = t;
        s->cap_dry_tails = c;
    }
    if (n) memcpy(s->dry_tails + s->n_dry_tails, tail, n * sizeof *tail);
    /* insertion order does not matter: lookups take the longest match and
     * test for an empty tail, both order-free */
    dry_entry *d = &s->dry_ent[s->n_dry_ent];
    d->off = (uint32_t)s->n_dry_tails;
    d->len = (uint32_t)n;
    d->next = s->dry_head[head];
    s->dry_head[head] = (int32_t)s->n_dry_ent++;
    s->n_dry_tails += n;
    return 0;
}

/* get_overlapping_token_sequences for one breaker: a token whose text holds
 * the whole breaker is a head with an empty tail; a token whose text ends
 * with a prefix of the breaker is a head whose tail is the rest of the
 * breaker, tokenized (cut to 20 tokens), once per distinct tail. */
static int dry_breaker(sampler *s, const sampler_vocab *vocab, const char *str, size_t slen,
                       char *err, size_t errlen) {
    for (int32_t id = 0; id < s->n_vocab; id++) {
        size_t wlen = 0;
        const char *w = vocab->piece(vocab->ctx, id, &wlen);
        if (!w) wlen = 0;
        if (slen <= wlen && memmem(w, wlen, str, slen)) {
            if (dry_add(s, id, NULL, 0, 0)) goto oom;
            continue;
        }
        for (size_t pos = 0; pos < wlen; pos++) {
            if (w[pos] != str[0]) continue;
            int match = 1;
            size_t i;
            for (i = 1; i < slen && i + pos < wlen; ++i)
                if (w[pos + i] != str[i]) {
                    match = 0;
                    break;
                }
            if (!match) continue;
            int32_t *ids = NULL;
            size_t n = 0;
            if (i < slen) {
                if (!vocab->tokenize) {
                    bk_err(err, errlen, "DRY: a sequence breaker longer than one byte needs the tokenizer");
                    return -1;
                }
                if (vocab->tokenize(vocab->ctx, str + i, slen - i, &ids, &n)) {
                    bk_err(err, errlen, "DRY: cannot tokenize a sequence breaker");
                    return -1;
                }
            }
            if (n > 20) n = 20;
            int r = dry_add(s, id, ids, n, 1);
            free(ids);
            if (r) goto oom;
        }
    }
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
    return -1;
}

void sampler_free(sampler *s) {
    if (!s) return;
    sampler_params_free(&s->p);
    free(s->bias);
    free(s->hist);
    free(s->pen_count);
    free(s->dry_head);
    free(s->dry_ent);
    free(s->dry_tails);
    free(s->dry_repeat);
    free(s->dry_max);
    free(s->dry_touched);
    free(s->cur);
    free(s->sc.buf);
    free(s->sc.bucket);
    free(s->tmp);
    free(s->idx);
    free(s->scores);
    free(s);
}

sampler *sampler_new(const sampler_params *p, int32_t n_vocab, const sampler_vocab *vocab,
                     const sampler_bias *biases, size_t n_biases, char *err, size_t errlen) {
    if (n_vocab <= 0) {
        bk_err(err, errlen, "the vocabulary is empty");
        return NULL;
    }
    if (sampler_check(p, err, errlen)) return NULL;
    sampler *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    if (sampler_params_copy(&s->p, p)) {
        free(s);
        s = NULL;
        goto oom;
    }
    s->n_vocab = n_vocab;
    size_t nv = (size_t)n_vocab;
    const sampler_params *q = &s->p;

    /* llama.cpp's "empty" samplers: built when the parameters make them
     * do nothing; they keep no state and draw nothing */
    int32_t pen_last = q->penalty_last_n < 0 ? 0 : q->penalty_last_n;
    s->pen_on = !(pen_last == 0 || (q->penalty_repeat == 1.0f && q->penalty_freq == 0.0f &&
                                     q->penalty_present == 0.0f));
    int32_t dry_last = q->dry_penalty_last_n < 0 ? 0 : q->dry_penalty_last_n;
    s->dry_on = q->dry_multiplier != 0.0f && q->dry_base >= 1.0f && dry_last != 0;
    s->sigma_on = !(q->top_n_sigma <= 0.0f);
    s->topk_on = !(q->top_k <= 0);
    s->typ_on = !(q->typ_p >= 1.0f);
    s->topp_on = !(q->top_p >= 1.0f);
    s->minp_on = !(q->min_p <= 0.0f);
    s->xtc_on = !(q->xtc_probability <= 0.0f || q->xtc_threshold > 0.5f);
    s->temp_on = !(q->temp == 1.0f && q->dynatemp_range <= 0.0f);
    s->p.penalty_last_n = pen_last;
    s->p.dry_penalty_last_n = dry_last;

    if (n_biases) {
        s->bias = malloc(n_biases * sizeof *s->bias);
        if (!s->bias) goto oom;
        memcpy(s->bias, biases, n_biases * sizeof *s->bias);
        s->n_bias = n_biases;
    }
    s->cur = malloc(nv * sizeof *s->cur);
    s->tmp = malloc(nv * sizeof *s->tmp);
    s->scores = malloc(nv * sizeof *s->scores);
    s->idx = malloc(nv * sizeof *s->idx);
    if (!s->cur || !s->tmp || !s->scores || !s->idx || scratch_reserve(&s->sc, nv)) goto oom;
    if (s->pen_on) {
        s->pen_count = calloc(nv, sizeof *s->pen_count);
        if (!s->pen_count) goto oom;
    }
    if (s->dry_on) {
        s->dry_head = malloc(nv * sizeof *s->dry_head);
        s->dry_max = malloc(nv * sizeof *s->dry_max);
        if (!s->dry_head || !s->dry_max) goto oom;
        for (size_t i = 0; i < nv; i++) {
            s->dry_head[i] = -1;
            s->dry_max[i] = -1;
        }
        for (size_t b = 0; b < q->n_dry_breakers; b++) {
            size_t len = q->dry_breaker_lens[b];
            if (len == 0) continue;             /* llama.cpp skips empty breakers */
            if (len > 40) len = 40;             /* and cuts long ones to 40 bytes */
            if (!vocab || !vocab->piece) {
                bk_err(err, errlen, "DRY needs the vocabulary's pieces");
                sampler_free(s);
                return NULL;
            }
            if (dry_breaker(s, vocab, q->dry_breakers[b], len, err, errlen)) {
                sampler_free(s);
                return NULL;
            }
        }
    }
    sampler_reset(s);
    return s;
oom:
    sampler_free(s);
    bk_err(err, errlen, "out of memory");
    return NULL;
}

void sampler_reset(sampler *s) {
    if (s->pen_count)
        for (size_t i = 0; i < s->n_hist; i++) {
            int32_t t = s->hist[i];
            if (t >= 0 && t < s->n_vocab) s->pen_count[t] = 0;
        }
    s->n_hist = 0;
    smp_mt_seed(&s->rng_dist, rng_seed(s->p.seed));
    if (s->xtc_on) smp_mt_seed(&s->rng_xtc, rng_seed(s->p.seed));
    s->arr.data = s->cur;
    s->arr.size = 0;
    s->arr.selected = -1;
    s->arr.sorted = 0;
}

int sampler_accept(sampler *s, int32_t token) {
    if (!s->pen_on && !s->dry_on) return 0;
    if (s->n_hist == s->cap_hist) {
        size_t c = s->cap_hist ? s->cap_hist * 2 : 256;
        int32_t *h = realloc(s->hist, c * sizeof *h);
        if (!h) return -1;
        s->hist = h;
        s->cap_hist = c;
    }
    if (s->pen_on) {
        size_t n = (size_t)s->p.penalty_last_n;
        if (token >= 0 && token < s->n_vocab) s->pen_count[token]++;
        if (s->n_hist >= n) {
            int32_t old = s->hist[s->n_hist - n];
            if (old >= 0 && old < s->n_vocab) s->pen_count[old]--;
        }
    }
    s->hist[s->n_hist++] = token;
    return 0;
}

/* ---- the samplers, in chain order ---- */

static void apply_bias(sampler *s, smp_array *c) {
    for (size_t k = 0; k < s->n_bias; k++) {
        const sampler_bias *b = &s->bias[k];
        if (b->token >= 0 && c->size > (size_t)b->token && c->data[b->token].id == b->token) {
            c->data[b->token].logit += b->bias;
            continue;
        }
        for (size_t i = 0; i < c->size; i++)
            if (c->data[i].id == b->token) {
                c->data[i].logit += b->bias;
                break;
            }
    }
}

static void apply_penalties(sampler *s, smp_array *c) {
    const sampler_params *q = &s->p;
    for (size_t i = 0; i < c->size; i++) {
        int32_t id = c->data[i].id;
        if (id < 0 || id >= s->n_vocab) continue;
        int count = s->pen_count[id];
        if (count == 0) continue;
        if (c->data[i].logit <= 0) c->data[i].logit *= q->penalty_repeat;
        else c->data[i].logit /= q->penalty_repeat;
        c->data[i].logit -= (float)count * q->penalty_freq + (float)(count > 0) * q->penalty_present;
    }
    c->sorted = 0;
}

/* the i-th token back from the newest of DRY's window */
#define RAT(s, i) ((s)->hist[(s)->n_hist - 1 - (size_t)(i)])

static int apply_dry(sampler *s, smp_array *c) {
    const sampler_params *q = &s->p;
    size_t win = s->n_hist < (size_t)q->dry_penalty_last_n ? s->n_hist : (size_t)q->dry_penalty_last_n;
    int last_n = (int)win;
    if (last_n <= q->dry_allowed_length) return 0;
    if ((size_t)last_n > s->cap_dry_repeat) {
        int *r = realloc(s->dry_repeat, (size_t)last_n * sizeof *r);
        if (!r) return -1;
        s->dry_repeat = r;
        s->cap_dry_repeat = (size_t)last_n;
    }
    memset(s->dry_repeat, 0, (size_t)last_n * sizeof *s->dry_repeat);
    for (size_t i = 0; i < s->n_dry_touched; i++) s->dry_max[s->dry_touched[i]] = -1;
    s->n_dry_touched = 0;

    /* step 1: the nearest restart sequence caps the repeat length */
    int rep_limit = last_n;
    for (int i = 0; i < last_n; ++i) {
        int32_t tok = RAT(s, i);
        if (tok < 0 || tok >= s->n_vocab || s->dry_head[tok] < 0) continue;
        int longest = -1;
        for (int32_t e = s->dry_head[tok]; e >= 0; e = s->dry_ent[e].next) {
            int seq_len = (int)s->dry_ent[e].len;
            if (seq_len > longest && seq_len <= i) {
                const int32_t *t = s->dry_tails + s->dry_ent[e].off;
                int match = 1;
                for (int off = 0; off < seq_len; ++off)
                    if (t[off] != RAT(s, i - off - 1)) {
                        match = 0;
                        break;
                    }
                if (match) longest = seq_len;
            }
        }
        if (longest >= 0) {
            rep_limit = i - longest;
            break;
        }
    }
    if (rep_limit < q->dry_allowed_length) return 0;

    /* step 2: the reverse Z-algorithm over the window */
    {
        const int last = last_n - 1;
        int rt = 0, lt = 0;
        for (int k = 1; k < last_n; ++k) {
            if (k > rt) {
                int n = 0;
                while (n + k < last_n && RAT(s, n) == RAT(s, n + k)) ++n;
                s->dry_repeat[last - k] = n < rep_limit ? n : rep_limit;
                if (n > 0) {
                    lt = k;
                    rt = k + n - 1;
                }
            } else {
                int pp = k - lt;
                int right_part_len = rt - k + 1;
                if (s->dry_repeat[last - pp] < right_part_len) {
                    int n = s->dry_repeat[last - pp] < rep_limit ? s->dry_repeat[last - pp] : rep_limit;
                    s->dry_repeat[last - k] = n;
                } else {
                    int i = rt + 1;
                    while (i < last_n && RAT(s, i) == RAT(s, i - k)) i += 1;
                    int n = i - k < rep_limit ? i - k : rep_limit;
                    s->dry_repeat[last - k] = n;
                    lt = k;
                    rt = i - 1;
                }
            }
        }
    }

    /* step 3: the longest repeat each next token would extend */
    for (int i = 0; i < last_n - 1; ++i) {
        int repeat_len = s->dry_repeat[i];
        if (repeat_len >= q->dry_allowed_length) {
            int32_t tok = RAT(s, last_n - 2 - i);
            if (tok < 0 || tok >= s->n_vocab) continue;
            if (s->dry_max[tok] < 0) {
                if (s->n_dry_touched == s->cap_dry_touched) {
                    size_t cc = s->cap_dry_touched ? s->cap_dry_touched * 2 : 64;
                    int32_t *t = realloc(s->dry_touched, cc * sizeof *t);
                    if (!t) return -1;
                    s->dry_touched = t;
                    s->cap_dry_touched = cc;
                }
                s->dry_touched[s->n_dry_touched++] = tok;
                s->dry_max[tok] = repeat_len;
            } else if (s->dry_max[tok] < repeat_len) {
                s->dry_max[tok] = repeat_len;
            }
        }
    }

    /* step 4: the penalty, multiplier * base^(len - allowed), exponent
     * clamped so the power stays finite; single-token breakers are spared */
    const float FLOAT_MAX_LOG = 88.7228391f;
    int max_exponent = 0;
    if (q->dry_base > 1.000001f) max_exponent = cvt_f32_i32(FLOAT_MAX_LOG / logf(q->dry_base));
    for (size_t i = 0; i < c->size; ++i) {
        int32_t id = c->data[i].id;
        if (id < 0 || id >= s->n_vocab || s->dry_max[id] < 0) continue;
        int single = 0;
        for (int32_t e = s->dry_head[id]; e >= 0; e = s->dry_ent[e].next)
            if (s->dry_ent[e].len == 0) {
                single = 1;
                break;
            }
        if (single) continue;
        int repeat_exp = s->dry_max[id] - q->dry_allowed_length;
        if (max_exponent > 0 && repeat_exp > max_exponent) repeat_exp = max_exponent;
        float penalty = (float)((double)q->dry_multiplier * pow((double)q->dry_base, (double)repeat_exp));
        c->data[i].logit -= penalty;
    }
    c->sorted = 0;
    return 0;
}

static void apply_top_n_sigma(sampler *s, smp_array *c) {
    if (c->size <= 1) return;
    float max = c->data[0].logit;
    float sum = 0;
    size_t valid = 0;
    for (size_t i = 0; i < c->size; ++i)
        if (c->data[i].logit != -INFINITY) {
            max = stdmax(max, c->data[i].logit);
            sum += c->data[i].logit;
            valid++;
        }
    float mean = valid > 0 ? sum / (float)valid : 0;
    float acc = 0;
    for (size_t i = 0; i < c->size; ++i)
        if (c->data[i].logit != -INFINITY) {
            double dlt = (double)(c->data[i].logit - mean);
            acc = (float)((double)acc + dlt * dlt);
        }
    float sd = valid > 0 ? sqrtf(acc / (float)valid) : 0;
    for (size_t i = 0; i < c->size; ++i)
        if (c->data[i].logit < max - (s->p.top_n_sigma * sd)) c->data[i].logit = -INFINITY;
}

static void apply_top_k(sampler *s, smp_array *c) {
    int32_t k = s->p.top_k;
    if (k <= 0) return;
    size_t kk = (size_t)k < c->size ? (size_t)k : c->size;
    if (!c->sorted) partial_sort_inplace(c, kk, &s->sc);
    c->size = kk;
}

static void apply_typical(sampler *s, smp_array *c) {
    softmax(c, 1, &s->sc);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->size; ++i) entropy += -c->data[i].p * logf(c->data[i].p);
    for (size_t i = 0; i < c->size; ++i) {
        s->scores[i] = fabsf(-logf(c->data[i].p) - entropy);
        s->idx[i] = i;
    }
    ix_sort(s->idx, s->idx + c->size, s->scores);
    float cum = 0.0f;
    size_t last_idx = c->size;
    size_t mk = (size_t)s->p.min_keep;
    for (size_t i = 0; i < c->size; ++i) {
        cum += c->data[s->idx[i]].p;
        if (cum > s->p.typ_p && (mk == 0 || i >= mk - 1)) {
            last_idx = i + 1;
            break;
        }
    }
    for (size_t i = 0; i < last_idx; ++i) s->tmp[i] = c->data[s->idx[i]];
    memcpy(c->data, s->tmp, last_idx * sizeof *c->data);
    c->size = last_idx;
    c->sorted = 0;
}

static void apply_top_p(sampler *s, smp_array *c) {
    softmax(c, 0, &s->sc);
    size_t k = c->size;
    const smp_token *pd = c->data;
    if (!c->sorted && c->size > 1024) {
        k = 256 < c->size ? 256 : c->size;
        bucket_partial_sort(c, k, &s->sc);
        pd = s->sc.buf;
    } else if (!c->sorted) {
        partial_sort_inplace(c, k, &s->sc);
    }
    float cum = 0.0f;
    size_t last_idx = c->size;
    size_t mk = (size_t)s->p.min_keep;
    for (size_t i = 0; i < c->size; ++i) {
        cum += pd[i].p;
        if (cum >= s->p.top_p && i + 1 >= mk) {
            last_idx = i + 1;
            break;
        }
        if (!c->sorted && i == k - 1) {
            k = c->size;
            bucket_partial_sort(c, k, &s->sc);
            pd = s->sc.buf;
        }
    }
    if (!c->sorted) {
        memcpy(c->data, s->sc.buf, last_idx * sizeof *c->data);
        c->sorted = 1;
    }
    c->size = last_idx;
}

static void apply_min_p(sampler *s, smp_array *c) {
    if (!c->size) return;
    int applied = 0;
    size_t mk = (size_t)s->p.min_keep;
    if (!c->sorted) {
        float max_logit = -FLT_MAX;
        for (size_t i = 0; i < c->size; ++i) max_logit = stdmax(max_logit, c->data[i].logit);
        const float min_logit = max_logit + logf(s->p.min_p);
        size_t n = 0;
        for (size_t i = 0; i < c->size; ++i)
            if (c->data[i].logit >= min_logit) s->tmp[n++] = c->data[i];
        if (n && n >= mk) {
            memcpy(c->data, s->tmp, n * sizeof *c->data);
            c->size = n;
            applied = 1;
        }
    }
    if (!applied) {
        if (!c->sorted) partial_sort_inplace(c, c->size, &s->sc);
        const float min_logit = c->data[0].logit + logf(s->p.min_p);
        size_t i = 1;
        for (; i < c->size; ++i)
            if (c->data[i].logit < min_logit && i >= mk) break;
        c->size = i;
    }
}

static void apply_xtc(sampler *s, smp_array *c) {
    if (s->p.xtc_probability <= 0.0f || s->p.xtc_threshold > 0.5f || c->size < 2) return;
    float chance = smp_uniform_float(&s->rng_xtc);
    if (chance > s->p.xtc_probability) return;
    softmax(c, 1, &s->sc);
    int pos_last = 0;
    for (size_t i = 0; i < c->size; ++i) {
        if (c->data[i].p >= s->p.xtc_threshold) pos_last = (int)i;
        else break;
    }
    if (c->size - (size_t)pos_last >= (size_t)s->p.min_keep && pos_last > 0) {
        c->data += pos_last;
        c->size -= (size_t)pos_last;
    }
}

/* llama_sampler_temp_impl: divide, or for temp <= 0 keep only the first
 * maximum (every other logit -inf) */
static void temp_impl(smp_array *c, float temp) {
    if (c->size == 0) return;
    if (temp <= 0.0f) {
        size_t max_i = 0;
        float max_l = c->data[0].logit;
        for (size_t i = 1; i < c->size; ++i) {
            if (c->data[i].logit > max_l) {
                c->data[max_i].logit = -INFINITY;
                max_i = i;
                max_l = c->data[i].logit;
            } else {
                c->data[i].logit = -INFINITY;
            }
        }
        return;
    }
    for (size_t i = 0; i < c->size; ++i) c->data[i].logit /= temp;
}

static void apply_temp(sampler *s, smp_array *c) {
    const sampler_params *q = &s->p;
    if (!(q->dynatemp_range > 0)) {
        temp_impl(c, q->temp);
        return;
    }
    const float min_temp = stdmax(0.0f, q->temp - q->dynatemp_range);
    const float max_temp = q->temp + q->dynatemp_range;
    if (c->size <= 1) return;
    float max_entropy = -logf(1.0f / (float)c->size);
    softmax(c, 1, &s->sc);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->size; ++i) {
        float prob = c->data[i].p;
        if (prob > 0.0f) entropy -= prob * logf(prob);
    }
    float norm = entropy / max_entropy;
    float dyn = min_temp + (max_temp - min_temp) * powf(norm, q->dynatemp_exponent);
    temp_impl(c, dyn);
    const double max_l = c->data[0].logit;
    double cum = 0.0;
    for (size_t i = 0; i < c->size; ++i) {
        double p = exp((double)c->data[i].logit - max_l);
        c->data[i].p = (float)p;
        cum += p;
    }
    for (size_t i = 0; i < c->size; ++i) c->data[i].p = (float)((double)c->data[i].p / cum);
}

/* llama_sampler_dist: softmax summed in double, one uniform double draw,
 * the first candidate whose running sum reaches draw * sum */
static void apply_dist(sampler *s, smp_array *c) {
    if (c->size == 0) {
        c->selected = -1;
        return;
    }
    c->selected = 0;
    if (c->size == 1) {
        (void)smp_uniform_double(&s->rng_dist);
        c->data[0].p = 1.0f;
        return;
    }
    float max_l = c->data[0].logit;
    if (!c->sorted)
        for (size_t i = 1; i < c->size; ++i) max_l = stdmax(max_l, c->data[i].logit);
    double sum = 0.0;
    for (size_t i = 0; i < c->size; ++i) {
        float p = expf(c->data[i].logit - max_l);
        c->data[i].p = p;
        sum += p;
    }
    const double rnd = smp_uniform_double(&s->rng_dist);
    double run = 0.0;
    const double tgt = sum * rnd;
    int found = 0;
    for (size_t i = 0; i < c->size; ++i) {
        if (!found) {
            run += c->data[i].p;
            if (run >= tgt) {
                c->selected = (int64_t)i;
                found = 1;
            }
        }
        c->data[i].p = (float)((double)c->data[i].p / sum);
    }
    if (!found) c->selected = (int64_t)c->size - 1;
}

/* set_logits: every token with its raw logit, in id order, unsorted. */
static void fill_candidates(sampler *s, const float *logits) {
    smp_array *c = &s->arr;
    size_t nv = (size_t)s->n_vocab;
    for (size_t i = 0; i < nv; i++) {
        s->cur[i].id = (int32_t)i;
        s->cur[i].logit = logits[i];
        s->cur[i].p = 0.0f;
    }
    c->data = s->cur;
    c->size = nv;
    c->selected = -1;
    c->sorted = 0;
}

/* The chain over the candidates as they stand, then the draw. */
static int32_t run_chain(sampler *s) {
    smp_array *c = &s->arr;
    if (s->n_bias) apply_bias(s, c);
    if (s->pen_on) apply_penalties(s, c);
    if (s->dry_on && apply_dry(s, c)) return -1;
    if (s->sigma_on) apply_top_n_sigma(s, c);
    if (s->topk_on) apply_top_k(s, c);
    if (s->typ_on) apply_typical(s, c);
    if (s->topp_on) apply_top_p(s, c);
    if (s->minp_on) apply_min_p(s, c);
    if (s->xtc_on) apply_xtc(s, c);
    if (s->temp_on) apply_temp(s, c);
    apply_dist(s, c);
    if (c->selected < 0) return -1;
    return c->data[c->selected].id;
}

int32_t sampler_sample(sampler *s, const float *logits) {
    fill_candidates(s, logits);
    return run_chain(s);
}

int32_t sampler_sample_constrained(sampler *s, const float *logits, const sampler_constraint *g, int *resampled) {
    if (resampled) *resampled = 0;
    fill_candidates(s, logits);
    int32_t id = run_chain(s);
    if (!g || id < 0) return id;
    int ok = g->allows(g->ctx, id);
    if (ok < 0) return -2;
    if (ok) return id;
    /* common_sampler_sample's resampling: the logits again, the grammar
     * over all of them, then the whole chain (dist and XTC draw again) */
    if (resampled) *resampled = 1;
    fill_candidates(s, logits);
    if (g->apply(g->ctx, s->arr.data, s->arr.size)) return -2;
    return run_chain(s);
}

const smp_token *sampler_candidates(const sampler *s, size_t *n, int64_t *selected, int *sorted) {
    if (n) *n = s->arr.size;
    if (selected) *selected = s->arr.selected;
    if (sorted) *sorted = s->arr.sorted;
    return s->arr.data;
}

/* ====================================================================== */
/* token probabilities                                                    */
/* ====================================================================== */

size_t sampler_token_probs(const float *logits, int32_t n_vocab, size_t n_top, int32_t chosen,
                           smp_token *work, sampler_prob *top, float *chosen_p) {
    size_t n = n_vocab > 0 ? (size_t)n_vocab : 0;
    for (size_t i = 0; i < n; i++) {
        work[i].id = (int32_t)i;
        work[i].logit = logits[i];
        work[i].p = 0.0f;
    }
    if (n_top > n) n_top = n;
    if (n_top > 0) lg_partial_sort(work, work + n_top, work + n, NULL);
    float max_l = -INFINITY;
    if (n_top > 0) max_l = work[0].logit;
    else
        for (size_t i = 0; i < n; i++) max_l = stdmax(max_l, work[i].logit);
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float p = expf(work[i].logit - max_l);
        work[i].p = p;
        sum += p;
    }
    for (size_t i = 0; i < n; i++) work[i].p /= sum;
    if (chosen_p) {
        *chosen_p = 0.0f;
        for (size_t i = 0; i < n; i++)
            if (work[i].id == chosen) {
                *chosen_p = work[i].p;
                break;
            }
    }
    for (size_t i = 0; i < n_top; i++) {
        top[i].id = work[i].id;
        top[i].p = work[i].p;
    }
    return n_top;
}

size_t sampler_post_probs(sampler *s, size_t n_top, int32_t chosen, sampler_prob *top,
                          float *chosen_p) {
    smp_array *c = &s->arr;
    if (!c->sorted && c->size) {
        int32_t id = c->selected >= 0 ? c->data[c->selected].id : -1;
        pr_sort(c->data, c->data + c->size, NULL);
        for (size_t i = 0; i < c->size; ++i)
            if (c->data[i].id == id) {
                c->selected = (int64_t)i;
                break;
            }
        c->sorted = 1;
    }
    if (chosen_p) {
        *chosen_p = 1.0f;       /* llama-server's value when the token is not among them */
        for (size_t i = 0; i < c->size; i++)
            if (c->data[i].id == chosen) {
                *chosen_p = c->data[i].p;
                break;
            }
    }
    size_t n = n_top < c->size ? n_top : c->size, k = 0;
    for (; k < n; k++) {
        if (c->data[k].p == 0.0f) break;
        top[k].id = c->data[k].id;
        top[k].p = c->data[k].p;
    }
    return k;
}

float sampler_logprob(float p) { return p == 0.0f ? -FLT_MAX : logf(p); }
