/*
 * kv.h -- one sequence's KV cache (graph-internal): K and V rows of the
 * types llama-server's -ctk/-ctv name (ops/kvq.h; f16 by default),
 * [layer][cell][kv_dim values], cells in position order (llama-server -np 1),
 * the layout llama.cpp b11669's context gives with flash attention on
 * (set_rows: f32 -> the row type with the CPU's from_float).
 */
#ifndef BANKML_KV_H
#define BANKML_KV_H

#include <stddef.h>
#include <stdint.h>

#include "ops/kvq.h"

typedef struct {
    size_t n_layer, n_ctx, kv_dim;
    kvq_type tk, tv;            /* the K and V row types */
    size_t k_row, v_row;        /* bytes of one cell's K row, V row */
    uint8_t *k, *v;
} kv_cache;

/* Allocates n_layer x n_ctx cells of kv_dim values each in rows of types tk
 * and tv (types that play, kv_dim a multiple of their blocks), zeroed. 0,
 * or -1 when the size overflows, a type does not fit or memory runs out
 * (*kv then holds nothing). */
int kv_init(kv_cache *kv, size_t n_layer, size_t n_ctx, size_t kv_dim, kvq_type tk, kvq_type tv);
void kv_free(kv_cache *kv);

/* Layer il's K (or V) cells: n_ctx rows of k_row (v_row) bytes. */
const uint8_t *kv_layer_k(const kv_cache *kv, size_t il);
const uint8_t *kv_layer_v(const kv_cache *kv, size_t il);

/* Writes n token rows of K and V (kv_dim floats each) as the cache's types
 * into cells [first, first + n) of layer il (first + n <= n_ctx, the
 * caller's check). */
void kv_write(kv_cache *kv, size_t il, size_t first, const float *k, const float *v, size_t n);

/* Bytes of cells [0, n) of every layer (0 when n > n_ctx): the rows' real
 * bytes. Layout of a saved prefix: for each layer its n K rows, then its n V
 * rows. */
size_t kv_bytes(const kv_cache *kv, size_t n);
/* Copies cells [0, n) into / out of buf (exactly kv_bytes(kv, n) bytes).
 * 0, or -1 when n or len do not fit (nothing copied). */
int kv_save(const kv_cache *kv, size_t n, void *buf, size_t len);
int kv_restore(kv_cache *kv, size_t n, const void *buf, size_t len);

#endif
