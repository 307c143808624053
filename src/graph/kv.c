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

/* ---- the window layers' cells (llama-server without --swa-full) ---- */

int kv_swa_init(kv_swa *c, size_t size, size_t n_ubatch)
{
    memset(c, 0, sizeof *c);
    c->pos = malloc((size ? size : 1) * sizeof *c->pos);
    if (n_ubatch < size) n_ubatch = size;
    c->idx = malloc((n_ubatch ? n_ubatch : 1) * sizeof *c->idx);
    c->want = malloc((n_ubatch ? n_ubatch : 1) * sizeof *c->want);
    if (!c->pos || !c->idx || !c->want) {
        kv_swa_free(c);
        return -1;
    }
    for (size_t i = 0; i < size; i++) c->pos[i] = -1;
    c->size = size;
    c->cap_idx = n_ubatch;
    return 0;
}

void kv_swa_free(kv_swa *c)
{
    free(c->pos);
    free(c->idx);
    free(c->want);
    c->pos = NULL;
    c->idx = NULL;
    c->want = NULL;
    c->size = c->used = c->head = 0;
}

int32_t kv_swa_pos_min(const kv_swa *c)
{
    int32_t m = -1;
    for (size_t i = 0; i < c->size; i++)
        if (c->pos[i] >= 0 && (m < 0 || c->pos[i] < m)) m = c->pos[i];
    return m;
}

int32_t kv_swa_pos_max(const kv_swa *c)
{
    int32_t m = -1;
    for (size_t i = 0; i < c->size; i++)
        if (c->pos[i] > m) m = c->pos[i];
    return m;
}

void kv_swa_rm(kv_swa *c, int64_t p0, int64_t p1)
{
    if (p0 < 0) p0 = 0;
    if (p1 < 0) p1 = INT64_MAX;
    size_t new_head = c->size;
    for (size_t i = 0; i < c->size; i++) {
        if (c->pos[i] < 0 || c->pos[i] < p0 || c->pos[i] >= p1) continue;
        c->pos[i] = -1;
        c->used--;
        if (new_head == c->size) new_head = i;
    }
    if (new_head != c->size && new_head < c->head) c->head = new_head;
}

size_t kv_swa_n_kv(const kv_swa *c)
{
    size_t top = 0;   /* used_max_p1 */
    for (size_t i = c->size; i > 0; i--)
        if (c->pos[i - 1] >= 0) {
            top = i;
            break;
        }
    size_t n = (top + 255) / 256 * 256;
    if (n < 256) n = 256;
    return n < c->size ? n : c->size;
}

int kv_swa_place(kv_swa *c, size_t n_swa, size_t first, size_t n)
{
    if (n > c->cap_idx || first + n > INT32_MAX) return -1;
    for (size_t t = 0; t < n; t++) c->idx[t] = (uint32_t)(first + t);   /* the positions, then the cells */
    return kv_swa_place_at(c, n_swa, NULL, n);
}

/* pos NULL: the positions are in c->idx (kv_swa_place's). */
int kv_swa_place_at(kv_swa *c, size_t n_swa, const int32_t *pos, size_t n)
{
    if (n == 0 || n > c->size || n > c->cap_idx) return -1;
    int32_t *want = c->want;
    for (size_t t = 0; t < n; t++) want[t] = pos ? pos[t] : (int32_t)c->idx[t];
    /* find_slot: one token at a time from the head */
    size_t head = c->head;
    if (head > c->used + 2 * n) head = 0;
    const int64_t p1 = (int64_t)kv_swa_pos_max(c) + 1;   /* the window's next position */
    size_t k = 0, tested = 0;
    while (k < n) {
        if (head + 1 > c->size) {
            tested += c->size - head;
            head = 0;
            continue;
        }
        const size_t i = head++;
        tested++;
        if (c->pos[i] < 0 || p1 - c->pos[i] >= (int64_t)n_swa) c->idx[k++] = (uint32_t)i;
        if (k < n && tested >= c->size) return -1;
    }
    /* apply_ubatch */
    int64_t max_rm = -1;
    for (size_t t = 0; t < n; t++) {
        const size_t i = c->idx[t];
        if (c->pos[i] >= 0) {
            if (c->pos[i] > max_rm) max_rm = c->pos[i];
            c->used--;
        }
        c->pos[i] = want[t];
        c->used++;
    }
    if (max_rm >= 0) {
        const int32_t pmin = kv_swa_pos_min(c);
        if (pmin <= max_rm) kv_swa_rm(c, pmin, max_rm + 1);
    }
    c->head = c->idx[n - 1] + 1;
    return 0;
}
