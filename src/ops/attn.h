/*
 * attn.h -- flash attention over a KV cache of f16 or typed rows (kvq.h), bit for bit as llama.cpp
 * b11669's ggml_compute_forward_flash_attn_ext_f16 (haswell CPU backend).
 *
 * Which kernel a call takes is ggml's choice, reproduced. With K and V both
 * f16:
 *   - one query row and n_kv >= 512: split-KV, the cells cut into
 *     llama_threads chunks of ceil(n_kv / t), a reference pass per chunk,
 *     the partials merged in chunk order;
 *   - 64 rows or more and head_dim % 8 == 0: tiled (64 x 64 tiles, f32 Q,
 *     ggml_v_expf softmax);
 *   - otherwise: the reference one_chunk kernel (Q rounded to f16, f16 V
 *     accumulator).
 * Each has a portable body and an AVX2 twin (simd), the same bits. Any other
 * pair of cache types (ops/kvq.h) takes the reference one_chunk kernel for
 * every row, whatever n_kv (b11669 splits the cells and tiles the rows only
 * for f32/f16 K and V of one type): Q converted once per row to the K type's
 * vec_dot_type, K rows through kq_vec_dot; V rows as f16 into the f16
 * accumulator, or widened (v_to_float) into an f32 one, scale by
 * ggml_vec_scale_f32 and fused multiply-add by ggml_vec_mad_f32. The mask
 * is causal: query row t sits at position first + t and sees cells [0, pos]
 * (cell i holds position i); with a sliding window n_swa > 0 only the cells
 * (pos - n_swa, pos] (llama.cpp's LLAMA_SWA_TYPE_STANDARD: masked when
 * pos - cell >= n_swa), the masked cells skipped as ggml skips -inf ones.
 * With cell_pos, cell i holds position cell_pos[i] (or is empty) and the
 * same rules read that position: the cells are still walked in cell order,
 * as ggml walks llama_kv_cache's cells whatever positions they hold.
 */
#ifndef BANKML_ATTN_H
#define BANKML_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "base/par.h"
#include "ops/kvq.h"

#define ATTN_TILE 64            /* ggml's GGML_FA_TILE_Q and GGML_FA_TILE_KV */
#define ATTN_SPLIT_KV_MIN 512   /* one-row calls split the cells from here */

/* One layer's attention for n_tok query rows. */
typedef struct {
    size_t head_dim, n_head, n_head_kv;   /* n_head a multiple of n_head_kv */
    size_t q_dim, kv_dim;                 /* head_dim * n_head, head_dim * n_head_kv */
    float kq_scale;                       /* 1 / sqrt(head_dim) */
    int llama_threads;                    /* llama-server's -t: split-KV chunks (>= 1) */
    const float *q;                       /* [n_tok][q_dim], RoPE applied */
    float *att;                           /* out: [n_tok][q_dim] */
    const uint8_t *kc, *vc;               /* this layer's cache: [cell][k_row / v_row bytes] */
    kvq_type tk, tv;                      /* their row types (f16 and f16: ggml's three kernels) */
    size_t k_row, v_row;                  /* bytes of one cell's K row, V row (all its heads) */
    size_t n_tok, first, n_kv;            /* rows, first row's position, cells seen */
    size_t n_swa;                         /* sliding window (gemma3's window layers); 0: none */
    const int32_t *cell_pos;              /* NULL: cell i holds position i; else the position each of
                                             the n_kv cells holds (-1: empty, masked), walked in cell
                                             order (a window cache reused past its size) */
} attn_args;

/* Per-worker scratch for head_dim (one per pool thread). */
typedef struct attn_scratch attn_scratch;

/* Scratch for n_workers workers (par_threads of the pool that runs
 * attn_flash) and heads of head_dim; NULL when out of memory. */
attn_scratch *attn_scratch_new(int n_workers, size_t head_dim);
void attn_scratch_free(attn_scratch *s);

/* Computes a->att on the pool (per head, and per query row or block of 64
 * rows). s must come from attn_scratch_new with at least par_threads(pool)
 * workers and a->head_dim. */
void attn_flash(par_pool *pool, int simd, const attn_args *a, attn_scratch *s);

#endif
