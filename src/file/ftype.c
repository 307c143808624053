/* ftype.c -- llama_ftype_name for a GGUF header (see ftype.h).
 *
 * The names and numbers are llama.h's llama_ftype; the guess maps the most
 * common tensor type to a file type as llama_model_loader does (Q3_K reads
 * as Q3_K - Medium, Q4_K as Q4_K - Medium, ...). */
#include "file/ftype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FT_GUESSED 1024u

/* llama_ftype value -> its name, behind the guessed prefix (so a name with
 * or without it is the same static string). */
#define FT_PREFIX "(guessed) "
#define G(name) FT_PREFIX name
static const struct { uint32_t ftype; const char *name; } ft_names[] = {
    {0, G("all F32")}, {1, G("F16")}, {32, G("BF16")}, {40, G("Q1_0")}, {41, G("Q2_0")}, {2, G("Q4_0")}, {3, G("Q4_1")}, {8, G("Q5_0")},
    {9, G("Q5_1")}, {7, G("Q8_0")}, {38, G("MXFP4 MoE")}, {39, G("NVFP4")}, {10, G("Q2_K - Medium")}, {21, G("Q2_K - Small")},
    {11, G("Q3_K - Small")}, {12, G("Q3_K - Medium")}, {13, G("Q3_K - Large")}, {14, G("Q4_K - Small")}, {15, G("Q4_K - Medium")},
    {16, G("Q5_K - Small")}, {17, G("Q5_K - Medium")}, {18, G("Q6_K")}, {36, G("TQ1_0 - 1.69 bpw ternary")},
    {37, G("TQ2_0 - 2.06 bpw ternary")}, {19, G("IQ2_XXS - 2.0625 bpw")}, {20, G("IQ2_XS - 2.3125 bpw")},
    {28, G("IQ2_S - 2.5 bpw")}, {29, G("IQ2_M - 2.7 bpw")}, {22, G("IQ3_XS - 3.3 bpw")}, {23, G("IQ3_XXS - 3.0625 bpw")},
    {24, G("IQ1_S - 1.5625 bpw")}, {31, G("IQ1_M - 1.75 bpw")}, {25, G("IQ4_NL - 4.5 bpw")}, {30, G("IQ4_XS - 4.25 bpw")},
    {26, G("IQ3_S - 3.4375 bpw")}, {27, G("IQ3_S mix - 3.66 bpw")},
};

/* ggml type id -> the llama_ftype the loader guesses from it (-1: none,
 * which the loader warns about and reads as all F32). */
static int ft_from_type(uint32_t t)
{
    static const struct { uint32_t type; int ftype; } map[] = {
        {0, 0}, {1, 1}, {30, 32}, {2, 2}, {3, 3}, {6, 8}, {7, 9}, {8, 7}, {10, 10}, {11, 12}, {12, 15}, {13, 17},
        {14, 18}, {34, 36}, {35, 37}, {16, 19}, {17, 20}, {22, 28}, {18, 23}, {19, 24}, {29, 31}, {20, 25},
        {23, 30}, {21, 26}, {40, 39}, {41, 40}, {42, 41},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].type == t) return map[i].ftype;
    return -1;
}

/* The N of a "blk.N." name as sscanf("blk.%d.") reads it, or -1. */
static long ft_layer(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long v = strtol(name + 4, &end, 10);
    return end == name + 4 ? -1 : (long)(int)v;
}

/* weight_name_comparer: by layer, then by name (bytes as unsigned). */
static int ft_cmp(const void *a, const void *b)
{
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    long lx = ft_layer(x->name), ly = ft_layer(y->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static const char *ft_name(uint32_t ftype)
{
    const char *n = G("unknown, may not work");
    for (size_t i = 0; i < sizeof ft_names / sizeof ft_names[0]; i++)
        if (ft_names[i].ftype == (ftype & ~FT_GUESSED)) n = ft_names[i].name;
    return (ftype & FT_GUESSED) ? n : n + sizeof FT_PREFIX - 1;
}

const char *gguf_ftype_name(const gguf_header *h)
{
    const gguf_kv *kv = gguf_kv_find(h, "general.file_type");
    if (kv && kv->type == GGUF_VT_U32) return ft_name((uint32_t)kv->u);
    uint32_t best = 0;   /* GGML_TYPE_F32 when there are no tensors */
    size_t n = h->n_tensors;
    const gguf_tensor **order = n ? malloc(n * sizeof *order) : NULL;
    if (n && !order) return ft_name(FT_GUESSED);   /* out of memory: the loader's default guess */
    for (size_t i = 0; i < n; i++) order[i] = &h->tensors[i];
    if (n) qsort(order, n, sizeof *order, ft_cmp);
    /* count per type; the first type whose count passes the best so far wins */
    uint32_t types[64], counts[64], top = 0;
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < nt && types[k] != order[i]->type) k++;
        if (k == nt) {
            if (nt == 64) continue;   /* more distinct types than ggml has: not a file llama.cpp loads */
            types[nt] = order[i]->type;
            counts[nt++] = 0;
        }
        if (++counts[k] > top) {
            top = counts[k];
            best = types[k];
        }
    }
    free(order);
    int ft = ft_from_type(best);
    return ft_name((uint32_t)(ft < 0 ? 0 : ft) | FT_GUESSED);
}
