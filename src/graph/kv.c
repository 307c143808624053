/*
 * kv.c -- one sequence's KV cache of typed rows (see kv.h).
 */
#include "graph/kv.h"

#include <stdlib.h>
#include <string.h>

int kv_init(kv_cache *kv, size_t n_layer, size_t n_ctx, size_t kv_dim, kvq_type tk, kvq_type tv)
{
    memset(kv, 0, sizeof *kv);
    const kvq_info *ik = kvq_info_of(tk), *iv = kvq_info_of(tv);
    if (!ik || !iv) return -1;
    const size_t kr = kvq_row_bytes(tk, kv_dim), vr = kvq_row_bytes(tv, kv_dim);
    if (kv_dim && (!kr || !vr)) return -1;
    size_t cells = n_layer * n_ctx;   /* n_layer <= 512, n_ctx <= 2^24: no overflow */
    if (kr && cells > SIZE_MAX / kr) return -1;
    if (vr && cells > SIZE_MAX / vr) return -1;
    const size_t kb = cells * kr, vb = cells * vr;
    kv->k = calloc(kb ? kb : 1, 1);
    kv->v = calloc(vb ? vb : 1, 1);
    if (!kv->k || !kv->v) {
        kv_free(kv);
        return -1;
    }
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->kv_dim = kv_dim;
    kv->tk = tk;
    kv->tv = tv;
    kv->k_row = kr;
    kv->v_row = vr;
    return 0;
}

void kv_free(kv_cache *kv)
{
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

const uint8_t *kv_layer_k(const kv_cache *kv, size_t il) { return kv->k + il * kv->n_ctx * kv->k_row; }
const uint8_t *kv_layer_v(const kv_cache *kv, size_t il) { return kv->v + il * kv->n_ctx * kv->v_row; }

void kv_write(kv_cache *kv, size_t il, size_t first, const float *k, const float *v, size_t n)
{
    uint8_t *kd = kv->k + (il * kv->n_ctx + first) * kv->k_row;
    uint8_t *vd = kv->v + (il * kv->n_ctx + first) * kv->v_row;
    for (size_t t = 0; t < n; t++) {   /* set_rows: one row per token */
        kvq_from_float(kv->tk, k + t * kv->kv_dim, kd + t * kv->k_row, kv->kv_dim);
        kvq_from_float(kv->tv, v + t * kv->kv_dim, vd + t * kv->v_row, kv->kv_dim);
    }
}

size_t kv_bytes(const kv_cache *kv, size_t n)
{
    if (n > kv->n_ctx) return 0;
    /* n <= n_ctx and the row sizes fit the cache that was allocated */
    return kv->n_layer * n * (kv->k_row + kv->v_row);
}

int kv_save(const kv_cache *kv, size_t n, void *buf, size_t len)
{
    if (n > kv->n_ctx || len != kv_bytes(kv, n)) return -1;
    uint8_t *out = buf;
    for (size_t il = 0; il < kv->n_layer; il++) {
        memcpy(out, kv_layer_k(kv, il), n * kv->k_row);
        out += n * kv->k_row;
        memcpy(out, kv_layer_v(kv, il), n * kv->v_row);
        out += n * kv->v_row;
    }
    return 0;
}

int kv_restore(kv_cache *kv, size_t n, const void *buf, size_t len)
{
    if (n > kv->n_ctx || len != kv_bytes(kv, n)) return -1;
    const uint8_t *in = buf;
    for (size_t il = 0; il < kv->n_layer; il++) {
        memcpy(kv->k + il * kv->n_ctx * kv->k_row, in, n * kv->k_row);
        in += n * kv->k_row;
        memcpy(kv->v + il * kv->n_ctx * kv->v_row, in, n * kv->v_row);
        in += n * kv->v_row;
    }
    return 0;
}
