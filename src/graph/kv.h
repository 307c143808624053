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

/* The cells of the window layers in llama-server's default cache (no
 * --swa-full): llama_kv_cache_iswa's smaller kv_swa of size cells, one
 * sequence. A ubatch's tokens go where find_slot (cont = false) puts them:
 * from the head, an empty cell or one whose position the window already
 * masks for the next position, wrapping at size; apply_ubatch then purges
 * the positions at or below the highest one overwritten (seq_rm) and moves
 * the head past the last cell. The attention walks these cells in cell
 * order (pos: the position each holds, -1 empty). */
typedef struct {
    size_t size, head, used;    /* cells, where the search starts, cells holding a position */
    int32_t *pos;               /* size entries: the position a cell holds, -1 empty */
    uint32_t *idx;              /* the last placed ubatch's cells, one per token */
    int32_t *want;              /* scratch: the positions being placed */
    size_t cap_idx;
} kv_swa;

/* size cells, room for ubatches of up to max(size, n_ubatch) tokens. 0, or -1 (out of
 * memory; *c then holds nothing). */
int kv_swa_init(kv_swa *c, size_t size, size_t n_ubatch);
void kv_swa_free(kv_swa *c);
/* Places n tokens at positions [first, first + n) (n <= the room of
 * init): c->idx[i] is token i's cell. 0, or -1 when no slot is found (the
 * cells then are unchanged). */
int kv_swa_place(kv_swa *c, size_t n_swa, size_t first, size_t n);
/* The same for n tokens at the positions pos[0..n) (n <= size): a
 * checkpoint's cells placed again (state_read's find_slot). */
int kv_swa_place_at(kv_swa *c, size_t n_swa, const int32_t *pos, size_t n);
/* llama_kv_cache::seq_rm(seq, p0, p1) (p1 < 0: to the end): empties the
 * cells holding positions in [p0, p1), the head moved back to the first. */
void kv_swa_rm(kv_swa *c, int64_t p0, int64_t p1);
/* The lowest and highest positions held (-1 when empty). */
int32_t kv_swa_pos_min(const kv_swa *c);
int32_t kv_swa_pos_max(const kv_swa *c);
/* get_n_kv: the cells an ubatch's attention reads, max(256, the highest used
 * cell + 1 padded to 256), at most size. */
size_t kv_swa_n_kv(const kv_swa *c);

#endif
