/*
 * kv.h -- one sequence's KV cache (graph-internal): f16 K and V rows,
 * [layer][cell][kv_dim], cells in position order (llama-server -np 1), the
 * type llama.cpp b11669's context gives with flash attention on (set_rows:
 * f32 -> f16, round to nearest even).
 */
#ifndef BANKML_KV_H
#define BANKML_KV_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t n_layer, n_ctx, kv_dim;
    uint16_t *k, *v;
} kv_cache;

/* Allocates n_layer x n_ctx cells of kv_dim halves each, zeroed. 0, or -1
 * when the size overflows or memory runs out (*kv then holds nothing). */
int kv_init(kv_cache *kv, size_t n_layer, size_t n_ctx, size_t kv_dim);
void kv_free(kv_cache *kv);

/* Layer il's K (or V) cells: n_ctx rows of kv_dim halves. */
const uint16_t *kv_layer_k(const kv_cache *kv, size_t il);
const uint16_t *kv_layer_v(const kv_cache *kv, size_t il);

/* Rounds n token rows of K and V (kv_dim floats each) into cells
 * [first, first + n) of layer il (first + n <= n_ctx, the caller's check). */
void kv_write(kv_cache *kv, size_t il, size_t first, const float *k, const float *v, size_t n);

/* Bytes of cells [0, n) of every layer (0 when n > n_ctx). Layout of a
 * saved prefix: for each layer its n K rows, then its n V rows. */
size_t kv_bytes(const kv_cache *kv, size_t n);
/* Copies cells [0, n) into / out of buf (exactly kv_bytes(kv, n) bytes).
 * 0, or -1 when n or len do not fit (nothing copied). */
int kv_save(const kv_cache *kv, size_t n, void *buf, size_t len);
int kv_restore(kv_cache *kv, size_t n, const void *buf, size_t len);

#endif
