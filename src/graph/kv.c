/*
 * kv.c -- one sequence's f16 KV cache (see kv.h).
 */
#include "graph/kv.h"

#include <stdlib.h>
#include <string.h>

#include "ops/f16.h"

int kv_init(kv_cache *kv, size_t n_layer, size_t n_ctx, size_t kv_dim)
{
    memset(kv, 0, sizeof *kv);
    size_t elems = n_layer * n_ctx;   /* n_layer <= 512, n_ctx <= 2^24: no overflow */
    if (kv_dim && elems > SIZE_MAX / sizeof(uint16_t) / kv_dim) return -1;
    elems *= kv_dim;
    if (elems == 0) elems = 1;
    kv->k = calloc(elems, sizeof(uint16_t));
    kv->v = calloc(elems, sizeof(uint16_t));
    if (!kv->k || !kv->v) {
        kv_free(kv);
        return -1;
    }
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->kv_dim = kv_dim;
    return 0;
}

void kv_free(kv_cache *kv)
{
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

const uint16_t *kv_layer_k(const kv_cache *kv, size_t il) { return kv->k + il * kv->n_ctx * kv->kv_dim; }
const uint16_t *kv_layer_v(const kv_cache *kv, size_t il) { return kv->v + il * kv->n_ctx * kv->kv_dim; }

void kv_write(kv_cache *kv, size_t il, size_t first, const float *k, const float *v, size_t n)
{
    const size_t off = il * kv->n_ctx * kv->kv_dim + first * kv->kv_dim;
    f32_to_f16_row(k, kv->k + off, n * kv->kv_dim);
    f32_to_f16_row(v, kv->v + off, n * kv->kv_dim);
}

size_t kv_bytes(const kv_cache *kv, size_t n)
{
    if (n > kv->n_ctx) return 0;
    /* n <= n_ctx and kv_dim, n_layer fit the cache that was allocated */
    return kv->n_layer * 2 * n * kv->kv_dim * sizeof(uint16_t);
}

int kv_save(const kv_cache *kv, size_t n, void *buf, size_t len)
{
    if (n > kv->n_ctx || len != kv_bytes(kv, n)) return -1;
    const size_t row = n * kv->kv_dim;
    uint16_t *out = buf;
    for (size_t il = 0; il < kv->n_layer; il++) {
        const size_t off = il * kv->n_ctx * kv->kv_dim;
        memcpy(out, kv->k + off, row * sizeof(uint16_t));
        out += row;
        memcpy(out, kv->v + off, row * sizeof(uint16_t));
        out += row;
    }
    return 0;
}

int kv_restore(kv_cache *kv, size_t n, const void *buf, size_t len)
{
    if (n > kv->n_ctx || len != kv_bytes(kv, n)) return -1;
    const size_t row = n * kv->kv_dim;
    const uint16_t *in = buf;
    for (size_t il = 0; il < kv->n_layer; il++) {
        const size_t off = il * kv->n_ctx * kv->kv_dim;
        memcpy(kv->k + off, in, row * sizeof(uint16_t));
        in += row;
        memcpy(kv->v + off, in, row * sizeof(uint16_t));
        in += row;
    }
    return 0;
}
