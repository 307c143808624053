/*
 * attn.c -- flash attention over the KV cache (f16, or the -ctk/-ctv types of kvq.h), as llama.cpp b11669's
 * ggml_compute_forward_flash_attn_ext_f16 computes it on the haswell CPU
 * backend (see attn.h for which kernel a micro-batch takes). Contraction is
 * off for the whole file: where the shipped binary fuses, the code says
 * fmaf().
 */
#pragma GCC optimize("fp-contract=off")

#include "ops/attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/f16.h"
#include "ops/vec.h"

#define INLINE VEC_INLINE
#define FW_X86 VEC_X86
#define FW_TILE ATTN_TILE

/* ---- attention -------------------------------------------------------------- */

/* Per-worker scratch (floats, but the f16 accumulator). */
typedef struct {
    float *kt, *vt, *kq, *vkq, *qt, *ms, *part;
    uint16_t *vkq16;
} fw_scratch;

struct attn_scratch {
    int n;
    fw_scratch *w;
};

typedef struct {
    const attn_args *m;
    fw_scratch *scr;
    const uint16_t *kc, *vc;     /* this layer's cache */
    size_t n_tok, first, n_kv, nblocks;
    int path;                    /* 0 reference, 1 tiled, 2 split-KV, 3 typed reference */
} attn_ctx;

/* The first cell a row at pos sees: the sliding window's lower edge (0
 * without a window). */
static inline size_t attn_lo(const attn_args *m, size_t pos)
{
    return m->n_swa && pos >= m->n_swa ? pos + 1 - m->n_swa : 0;
}

/* 1 when a row at pos sees cell ic: the causal mask and the window over
 * the position the cell holds (cell_pos: -1 is an empty cell). */
static inline int attn_seen(const attn_args *m, size_t pos, size_t ic)
{
    if (!m->cell_pos) return ic <= pos && ic >= attn_lo(m, pos);
    const int32_t p = m->cell_pos[ic];
    return p >= 0 && (size_t)p <= pos && !(m->n_swa && pos - (size_t)p >= m->n_swa);
}

/* 1 when a row at pos sees none of the 64 cells from ic (ggml: the row's
 * tile maximum is -inf, so the row skips the tile). */
static inline int attn_row_off(const attn_args *m, size_t pos, size_t ic)
{
    if (!m->cell_pos) return pos < ic || ic + FW_TILE <= attn_lo(m, pos);
    for (size_t tk = 0; tk < FW_TILE; tk++)
        if (attn_seen(m, pos, ic + tk)) return 0;
    return 1;
}

/* The end of the cells a block of rows whose last position is last_pos
 * can see: n_kv with cell positions, else up to last_pos. */
static inline size_t attn_cells_end(const attn_ctx *a, size_t last_pos)
{
    if (a->m->cell_pos || a->n_kv <= last_pos) return a->n_kv;
    return last_pos + 1;
}

/* flash_attn_ext_f16_one_chunk for one query row over cells [c0, c1):
 * Q rounded to f16, f16 dot products, online softmax with an f16 V
 * accumulator (scale and fused multiply-add rounded to f16 each step),
 * S = fma(S, ms, vs). Writes M, S and the widened accumulator (partial) or
 * the normalised row (out). */
INLINE void ref_row_body(const attn_ctx *a, fw_scratch *s, const float *q, size_t hkv,
                         size_t pos, size_t c0, size_t c1, float *out, float *partial)
{
    const attn_args *m = a->m;
    const size_t hd = m->head_dim, kvd = m->kv_dim;
    const float scale = m->kq_scale;
    float *qf = s->qt;
    uint16_t *acc = s->vkq16;
    for (size_t d = 0; d < hd; d++) qf[d] = f16_to_f32(f32_to_f16(q[d]));
    memset(acc, 0, hd * sizeof *acc);
    float S = 0.0f, M = -INFINITY;
    for (size_t ic = c0; ic < c1; ic++) {
        if (!attn_seen(m, pos, ic)) continue;   /* the mask: -inf cells are skipped */
        const uint16_t *kr = a->kc + ic * kvd + hkv * hd;
        const uint16_t *vr = a->vc + ic * kvd + hkv * hd;
        float sc = f16_vec_dot(F16_T_F16, kr, qf, hd);
        sc = sc * scale;
        sc = sc + 0.0f;
        const float Mold = M;
        float ms = 1.0f, vs = 1.0f;
        if (sc > M) {
            M = sc;
            ms = expf(Mold - M);
            for (size_t d = 0; d < hd; d++) acc[d] = f32_to_f16(f16_to_f32(acc[d]) * ms);
        } else {
            vs = expf(sc - M);
        }
        for (size_t d = 0; d < hd; d++)
            acc[d] = f32_to_f16(fmaf(f16_to_f32(vr[d]), vs, f16_to_f32(acc[d])));
        S = fmaf(S, ms, vs);
    }
    if (partial) {
        partial[0] = M;
        partial[1] = S;
        for (size_t d = 0; d < hd; d++) partial[2 + d] = f16_to_f32(acc[d]);
    } else {
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        for (size_t d = 0; d < hd; d++) out[d] = f16_to_f32(acc[d]) * inv;
    }
}

/* flash_attn_ext_tiled for up to 64 query rows of one head: f32 Q, K and V
 * tiles of 64 cells widened from f16, scores as one fused chain per cell,
 * scaled, masked; per row the tile maximum, rescale, ggml_v_expf softmax
 * summed lanes-then-double; V accumulated as one fused chain per cell. */
INLINE void tiled_body(const attn_ctx *a, fw_scratch *s, size_t head, size_t t0, size_t nr)
{
    const attn_args *m = a->m;
    const size_t hd = m->head_dim, kvd = m->kv_dim, qd = m->q_dim;
    const size_t hkv = head / (m->n_head / m->n_head_kv);
    const float scale = m->kq_scale;
    float *kt = s->kt, *vt = s->vt, *kq = s->kq, *vkq = s->vkq, *Ms = s->ms, *Ss = s->ms + FW_TILE;
    for (size_t r = 0; r < nr; r++) {
        Ms[r] = -INFINITY;
        Ss[r] = 0.0f;
    }
    memset(vkq, 0, nr * hd * sizeof(float));
    const size_t last_pos = a->first + t0 + nr - 1;
    for (size_t ic = 0; ic < attn_cells_end(a, last_pos); ic += FW_TILE) {
        for (size_t tk = 0; tk < FW_TILE; tk++) {
            const uint16_t *kr = a->kc + (ic + tk) * kvd + hkv * hd;
            for (size_t d = 0; d < hd; d++) kt[tk * hd + d] = f16_to_f32(kr[d]);
        }
        for (size_t r = 0; r < nr; r++) {
            const size_t pos = a->first + t0 + r;
            if (attn_row_off(m, pos, ic)) { kq[r * FW_TILE] = NAN; continue; }   /* whole tile masked */
            const float *q = m->q + (t0 + r) * qd + head * hd;
            float *row = kq + r * FW_TILE;
            for (size_t tk = 0; tk < FW_TILE; tk++) {
                const float *kr = kt + tk * hd;
                float acc = 0.0f;
                for (size_t d = 0; d < hd; d++) acc = fmaf(kr[d], q[d], acc);
                acc = acc * scale;
                row[tk] = attn_seen(m, pos, ic + tk) ? acc + 0.0f : acc + -INFINITY;
            }
            float mx = -INFINITY;
            for (size_t tk = 0; tk < FW_TILE; tk++) mx = row[tk] > mx ? row[tk] : mx;
            const float Mold = Ms[r];
            const float Mnew = fmaxf(Mold, mx);
            if (Mnew > Mold) {
                const float ms = expf(Mold - Mnew);
                float *acc = vkq + r * hd;
                for (size_t d = 0; d < hd; d++) acc[d] = acc[d] * ms;
                Ss[r] *= ms;
            }
            Ms[r] = Mnew;
            double sum = 0.0;
            for (size_t tk = 0; tk < FW_TILE; tk += 8) {
                float l[8];
                for (int i = 0; i < 8; i++) {
                    l[i] = v_expf1(row[tk + i] - Mnew);
                    row[tk + i] = l[i];
                }
                const float s8 = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
                sum += (double)s8;
            }
            Ss[r] = (float)((double)Ss[r] + sum);
        }
        for (size_t tk = 0; tk < FW_TILE; tk++) {
            const uint16_t *vr = a->vc + (ic + tk) * kvd + hkv * hd;
            for (size_t d = 0; d < hd; d++) vt[tk * hd + d] = f16_to_f32(vr[d]);
        }
        for (size_t r = 0; r < nr; r++) {
            if (attn_row_off(m, a->first + t0 + r, ic)) continue;
            const float *p = kq + r * FW_TILE;
            float *acc = vkq + r * hd;
            for (size_t tk = 0; tk < FW_TILE; tk++) {
                const float w = p[tk];
                const float *vr = vt + tk * hd;
                for (size_t d = 0; d < hd; d++) acc[d] = fmaf(vr[d], w, acc[d]);
            }
        }
    }
    for (size_t r = 0; r < nr; r++) {
        const float inv = Ss[r] == 0.0f ? 0.0f : 1.0f / Ss[r];
        float *out = m->att + (t0 + r) * qd + head * hd;
        const float *acc = vkq + r * hd;
        for (size_t d = 0; d < hd; d++) out[d] = acc[d] * inv;
    }
}

/* The split-KV decode (one query row, n_kv >= 512): the cells cut into
 * llama_threads chunks, a reference pass per chunk, then the partials merged
 * in chunk order with the binary's fused steps. */
INLINE void split_body(const attn_ctx *a, fw_scratch *s, size_t head)
{
    const attn_args *m = a->m;
    const size_t hd = m->head_dim, qd = m->q_dim;
    const size_t hkv = head / (m->n_head / m->n_head_kv);
    const size_t nth = (size_t)m->llama_threads;
    const size_t cs = (a->n_kv + nth - 1) / nth;
    const size_t pos = a->first;
    const float *q = m->q + head * hd;
    float *fin = s->vkq;
    float Mf = -INFINITY, Sf = 0.0f;
    memset(fin, 0, hd * sizeof(float));
    for (size_t c = 0; c < nth; c++) {
        const size_t c0 = c * cs;
        if (c0 >= a->n_kv) continue;
        const size_t c1 = c0 + cs < a->n_kv ? c0 + cs : a->n_kv;
        float *part = s->part;
        ref_row_body(a, s, q, hkv, pos, c0, c1, NULL, part);
        const float Mc = part[0], Sc = part[1];
        if (Sc == 0.0f) continue;
        const float Mn = fmaxf(Mf, Mc);
        const float so = expf(Mf - Mn);
        const float sn = expf(Mc - Mn);
        for (size_t d = 0; d < hd; d++) fin[d] = fmaf(fin[d], so, part[2 + d] * sn);
        Sf = fmaf(Sf, so, Sc * sn);
        Mf = Mn;
    }
    if (Sf != 0.0f) {
        const float inv = 1.0f / Sf;
        for (size_t d = 0; d < hd; d++) fin[d] = fin[d] * inv;
    }
    memcpy(m->att + head * hd, fin, hd * sizeof(float));
    (void)qd;
}

/* flash_attn_ext_f16_one_chunk for one query row over every cell, for cache
 * types other than f16/f16 (kvq.h): Q converted to the K type's vec_dot_type,
 * kq_vec_dot per cell; an f16 V into the f16 accumulator as ref_row_body,
 * any other V widened by v_to_float into an f32 accumulator (scale:
 * ggml_vec_scale_f32, accumulate: ggml_vec_mad_f32's fused chains). */
static void typed_row(const attn_ctx *a, fw_scratch *s, const float *q, size_t hkv, size_t pos,
                      float *out)
{
    const attn_args *m = a->m;
    const size_t hd = m->head_dim;
    const float scale = m->kq_scale;
    uint8_t *qc = (uint8_t *)(void *)s->qt;          /* hd floats: room for any conversion */
    float *acc = s->vkq, *v32 = s->kt;
    uint16_t *acc16 = s->vkq16;
    const int v16 = m->tv == KVQ_F16;
    const size_t kh = kvq_row_bytes(m->tk, hd), vh = kvq_row_bytes(m->tv, hd);
    kvq_q_convert(m->tk, q, qc, hd);
    if (v16) memset(acc16, 0, hd * sizeof *acc16);
    else memset(acc, 0, hd * sizeof *acc);
    float S = 0.0f, M = -INFINITY;
    const size_t lo = m->cell_pos ? 0 : attn_lo(m, pos);
    const size_t end = attn_cells_end(a, pos);   /* cells past pos are masked */
    for (size_t ic = lo; ic < end; ic++) {
        if (m->cell_pos && !attn_seen(m, pos, ic)) continue;
        const uint8_t *kr = m->kc + ic * m->k_row + hkv * kh;
        const uint8_t *vr = m->vc + ic * m->v_row + hkv * vh;
        float sc = kvq_dot(m->tk, kr, qc, hd);
        sc = sc * scale;
        sc = sc + 0.0f;
        const float Mold = M;
        float ms = 1.0f, vs = 1.0f;
        if (v16) {
            const uint16_t *v = (const uint16_t *)(const void *)vr;
            if (sc > M) {
                M = sc;
                ms = expf(Mold - M);
                for (size_t d = 0; d < hd; d++) acc16[d] = f32_to_f16(f16_to_f32(acc16[d]) * ms);
            } else {
                vs = expf(sc - M);
            }
            for (size_t d = 0; d < hd; d++)
                acc16[d] = f32_to_f16(fmaf(f16_to_f32(v[d]), vs, f16_to_f32(acc16[d])));
        } else {
            if (sc > M) {
                M = sc;
                ms = expf(Mold - M);
                for (size_t d = 0; d < hd; d++) acc[d] = acc[d] * ms;
            } else {
                vs = expf(sc - M);
            }
            kvq_to_float(m->tv, vr, v32, hd);
            for (size_t d = 0; d < hd; d++) acc[d] = fmaf(v32[d], vs, acc[d]);
        }
        S = fmaf(S, ms, vs);
    }
    if (v16)
        for (size_t d = 0; d < hd; d++) acc[d] = f16_to_f32(acc16[d]);
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (size_t d = 0; d < hd; d++) out[d] = acc[d] * inv;
}

INLINE void attn_job_body(void *ctx, size_t r0, size_t r1, int worker)
{
    const attn_ctx *a = ctx;
    const attn_args *m = a->m;
    fw_scratch *s = &a->scr[worker];
    const size_t hd = m->head_dim, qd = m->q_dim;
    const size_t grp = m->n_head / m->n_head_kv;
    for (size_t j = r0; j < r1; j++) {
        if (a->path == 3) {
            const size_t head = j / a->n_tok, t = j % a->n_tok;
            typed_row(a, s, m->q + t * qd + head * hd, head / grp, a->first + t,
                      m->att + t * qd + head * hd);
        } else if (a->path == 2) {
            split_body(a, s, j);
        } else if (a->path == 1) {
            const size_t head = j / a->nblocks, b = j % a->nblocks;
            const size_t t0 = b * FW_TILE;
            const size_t nr = a->n_tok - t0 < FW_TILE ? a->n_tok - t0 : FW_TILE;
            tiled_body(a, s, head, t0, nr);
        } else {
            const size_t head = j / a->n_tok, t = j % a->n_tok;
            ref_row_body(a, s, m->q + t * qd + head * hd, head / grp, a->first + t, 0, a->n_kv,
                         m->att + t * qd + head * hd, NULL);
        }
    }
}

static void attn_job_c(void *ctx, size_t r0, size_t r1, int worker)
{
    attn_job_body(ctx, r0, r1, worker);
}

/* ---- the same kernels in AVX2 lanes --------------------------------------------
 *
 * Everything below computes each element with exactly the operations of the
 * portable bodies above, in the same order: vector lanes only ever run
 * independent chains side by side (eight cells' score chains, eight columns'
 * V chains, eight elements of an f16 accumulator), never a sum split across
 * lanes. f16 <-> f32 goes through F16C, which rounds to nearest even as
 * f32_to_f16() does. Chosen at run time with q8_simd() (AVX2 + FMA + F16C). */


#if FW_X86
AVX_INLINE float h16(uint16_t h) { return _cvtsh_ss(h); }
AVX_INLINE uint16_t r16(float f) { return (uint16_t)_cvtss_sh(f, 0); }
AVX_INLINE __m256 ld16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
AVX_INLINE void st16(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph(v, 0));
}

/* ref_row_body() with the f16 accumulator eight elements at a time. */
AVX_TARGET static void ref_row_avx(const attn_ctx *a, fw_scratch *s, const float *q, size_t hkv,
                                   size_t pos, size_t c0, size_t c1, float *out, float *partial)
{
    const attn_args *m = a->m;
    const size_t hd = m->head_dim, kvd = m->kv_dim, h8 = hd / 8 * 8;
    const float scale = m->kq_scale;
    float *qf = s->qt;
    uint16_t *acc = s->vkq16;
    size_t d;
    for (d = 0; d < h8; d += 8) {
        _mm256_storeu_ps(qf + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + d), 0)));
    }
    for (; d < hd; d++) qf[d] = h16(r16(q[d]));
    memset(acc, 0, hd * sizeof *acc);
    float S = 0.0f, M = -INFINITY;
    const size_t end = m->cell_pos || c1 < pos + 1 ? c1 : pos + 1;   /* cells past pos are masked */
    const size_t lo = m->cell_pos ? 0 : attn_lo(m, pos);            /* and those below the window */
    for (size_t ic = c0 > lo ? c0 : lo; ic < end; ic++) {
        if (m->cell_pos && !attn_seen(m, pos, ic)) continue;
        const uint16_t *kr = a->kc + ic * kvd + hkv * hd;
        const uint16_t *vr = a->vc + ic * kvd + hkv * hd;
        float sc = f16_vec_dot(F16_T_F16, kr, qf, hd);
        sc = sc * scale;
        sc = sc + 0.0f;
        const float Mold = M;
        float ms = 1.0f, vs = 1.0f;
        if (sc > M) {
            M = sc;
            ms = expf(Mold - M);
            const __m256 vms = _mm256_set1_ps(ms);
            for (d = 0; d < h8; d += 8) {
                const __m256 t = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(ld16(acc + d), vms), 0));
                st16(acc + d, _mm256_fmadd_ps(ld16(vr + d), _mm256_set1_ps(vs), t));
            }
            for (; d < hd; d++) {
                acc[d] = r16(h16(acc[d]) * ms);
                acc[d] = r16(fmaf(h16(vr[d]), vs, h16(acc[d])));
            }
        } else {
            vs = expf(sc - M);
            const __m256 vvs = _mm256_set1_ps(vs);
            for (d = 0; d < h8; d += 8)
                st16(acc + d, _mm256_fmadd_ps(ld16(vr + d), vvs, ld16(acc + d)));
            for (; d < hd; d++) acc[d] = r16(fmaf(h16(vr[d]), vs, h16(acc[d])));
        }
        S = fmaf(S, ms, vs);
    }
    if (partial) {
        partial[0] = M;
        partial[1] = S;
        for (d = 0; d < h8; d += 8) _mm256_storeu_ps(partial + 2 + d, ld16(acc + d));
        for (; d < hd; d++) partial[2 + d] = h16(acc[d]);
    } else {
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        const __m256 vinv = _mm256_set1_ps(inv);
        for (d = 0; d < h8; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(ld16(acc + d), vinv));
        for (; d < hd; d++) out[d] = h16(acc[d]) * inv;
    }
}

/* tiled_body() in lanes. The K tile is stored transposed (kt[d * 64 + cell])
 * so that eight cells' score chains run in one register, each still summed
 * over d in order; V chains run over eight columns at a time, each still
 * summed over the cells in order. hd is a multiple of 8 on this path. */
AVX_TARGET static void tiled_avx(const attn_ctx *a, fw_scratch *s, size_t head, size_t t0,
                                 size_t nr)
{
    const attn_args *m = a->m;
    const size_t hd = m->head_dim, kvd = m->kv_dim, qd = m->q_dim;
    const size_t hkv = head / (m->n_head / m->n_head_kv);
    const __m256 vscale = _mm256_set1_ps(m->kq_scale);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    float *kt = s->kt, *vt = s->vt, *kq = s->kq, *vkq = s->vkq, *Ms = s->ms, *Ss = s->ms + FW_TILE;
    for (size_t r = 0; r < nr; r++) {
        Ms[r] = -INFINITY;
        Ss[r] = 0.0f;
    }
    memset(vkq, 0, nr * hd * sizeof(float));
    const size_t last_pos = a->first + t0 + nr - 1;
    for (size_t ic = 0; ic < attn_cells_end(a, last_pos); ic += FW_TILE) {
        for (size_t tk = 0; tk < FW_TILE; tk++) {
            const uint16_t *kr = a->kc + (ic + tk) * kvd + hkv * hd;
            for (size_t d = 0; d < hd; d += 8) {
                float l[8];
                _mm256_storeu_ps(l, ld16(kr + d));
                for (int i = 0; i < 8; i++) kt[(d + (size_t)i) * FW_TILE + tk] = l[i];
            }
        }
        for (size_t r = 0; r < nr; r++) {
            const size_t pos = a->first + t0 + r;
            if (attn_row_off(m, pos, ic)) { kq[r * FW_TILE] = NAN; continue; }   /* whole tile masked */
            const float *q = m->q + (t0 + r) * qd + head * hd;
            float *row = kq + r * FW_TILE;
            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0,
                   c6 = c0, c7 = c0;
            for (size_t d = 0; d < hd; d++) {
                const __m256 qb = _mm256_set1_ps(q[d]);
                const float *k = kt + d * FW_TILE;
                c0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 0), qb, c0);
                c1 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 8), qb, c1);
                c2 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 16), qb, c2);
                c3 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 24), qb, c3);
                c4 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 32), qb, c4);
                c5 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 40), qb, c5);
                c6 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 48), qb, c6);
                c7 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 56), qb, c7);
            }
            const __m256 cs[8] = { c0, c1, c2, c3, c4, c5, c6, c7 };
            /* cells ic + tk with tk > pos - ic, or below the window's edge lo
             * (tk < lo - ic), are masked (-inf added) */
            const long lim = pos < ic ? -1 : pos - ic >= FW_TILE ? FW_TILE : (long)(pos - ic);
            const size_t lo = attn_lo(m, pos);
            const int lk = lo > ic ? (int)(lo - ic) : 0;
            float madd[FW_TILE];   /* with cell positions: each cell's mask read from them */
            if (m->cell_pos)
                for (size_t tk = 0; tk < FW_TILE; tk++)
                    madd[tk] = attn_seen(m, pos, ic + tk) ? 0.0f : -INFINITY;
            __m256 mx = ninf;
            for (int g = 0; g < 8; g++) {
                const __m256i idx = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * g));
                const __m256 masked = _mm256_castsi256_ps(
                    _mm256_or_si256(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32((int)lim)),
                                    _mm256_cmpgt_epi32(_mm256_set1_epi32(lk), idx)));
                const __m256 add = m->cell_pos ? _mm256_loadu_ps(madd + 8 * g)
                                               : _mm256_blendv_ps(_mm256_setzero_ps(), ninf, masked);
                const __m256 v = _mm256_add_ps(_mm256_mul_ps(cs[g], vscale), add);
                _mm256_storeu_ps(row + 8 * g, v);
                mx = _mm256_max_ps(v, mx);
            }
            float ml[8];
            _mm256_storeu_ps(ml, mx);
            float mxs = -INFINITY;
            for (int i = 0; i < 8; i++) mxs = ml[i] > mxs ? ml[i] : mxs;
            const float Mold = Ms[r];
            const float Mnew = fmaxf(Mold, mxs);
            if (Mnew > Mold) {
                const float ms = expf(Mold - Mnew);
                const __m256 vms = _mm256_set1_ps(ms);
                float *acc = vkq + r * hd;
                for (size_t d = 0; d < hd; d += 8)
                    _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vms));
                Ss[r] *= ms;
            }
            Ms[r] = Mnew;
            const __m256 vm = _mm256_set1_ps(Mnew);
            double sum = 0.0;
            for (size_t tk = 0; tk < FW_TILE; tk += 8) {
                const __m256 l = v_expf8(_mm256_sub_ps(_mm256_loadu_ps(row + tk), vm));
                _mm256_storeu_ps(row + tk, l);
                /* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
                const __m128 h = _mm_add_ps(_mm256_castps256_ps128(l), _mm256_extractf128_ps(l, 1));
                const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
                const float s8 = _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
                sum += (double)s8;
            }
            Ss[r] = (float)((double)Ss[r] + sum);
        }
        for (size_t tk = 0; tk < FW_TILE; tk++) {
            const uint16_t *vr = a->vc + (ic + tk) * kvd + hkv * hd;
            for (size_t d = 0; d < hd; d += 8) _mm256_storeu_ps(vt + tk * hd + d, ld16(vr + d));
        }
        for (size_t r = 0; r < nr; r++) {
            if (attn_row_off(m, a->first + t0 + r, ic)) continue;
            const float *p = kq + r * FW_TILE;
            float *acc = vkq + r * hd;
            size_t d = 0;
            for (; d + 32 <= hd; d += 32) {
                __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8),
                       a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
                for (size_t tk = 0; tk < FW_TILE; tk++) {
                    const __m256 w = _mm256_set1_ps(p[tk]);
                    const float *v = vt + tk * hd + d;
                    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(v), w, a0);
                    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(v + 8), w, a1);
                    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(v + 16), w, a2);
                    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(v + 24), w, a3);
                }
                _mm256_storeu_ps(acc + d, a0);
                _mm256_storeu_ps(acc + d + 8, a1);
                _mm256_storeu_ps(acc + d + 16, a2);
                _mm256_storeu_ps(acc + d + 24, a3);
            }
            for (; d < hd; d += 8) {
                __m256 a0 = _mm256_loadu_ps(acc + d);
                for (size_t tk = 0; tk < FW_TILE; tk++)
                    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(vt + tk * hd + d),
                                         _mm256_set1_ps(p[tk]), a0);
                _mm256_storeu_ps(acc + d, a0);
            }
        }
    }
    for (size_t r = 0; r < nr; r++) {
        const float inv = Ss[r] == 0.0f ? 0.0f : 1.0f / Ss[r];
        const __m256 vinv = _mm256_set1_ps(inv);
        float *out = m->att + (t0 + r) * qd + head * hd;
        const float *acc = vkq + r * hd;
        for (size_t d = 0; d < hd; d += 8)
            _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vinv));
    }
}

/* split_body() over ref_row_avx(), the merge eight columns at a time. */
AVX_TARGET static void split_avx(const attn_ctx *a, fw_scratch *s, size_t head)
{
    const attn_args *m = a->m;
    const size_t hd = m->head_dim, h8 = hd / 8 * 8;
    const size_t hkv = head / (m->n_head / m->n_head_kv);
    const size_t nth = (size_t)m->llama_threads;
    const size_t cs = (a->n_kv + nth - 1) / nth;
    const size_t pos = a->first;
    const float *q = m->q + head * hd;
    float *fin = s->vkq;
    float Mf = -INFINITY, Sf = 0.0f;
    size_t d;
    memset(fin, 0, hd * sizeof(float));
    for (size_t c = 0; c < nth; c++) {
        const size_t c0 = c * cs;
        if (c0 >= a->n_kv) continue;
        const size_t c1 = c0 + cs < a->n_kv ? c0 + cs : a->n_kv;
        float *part = s->part;
        ref_row_avx(a, s, q, hkv, pos, c0, c1, NULL, part);
        const float Mc = part[0], Sc = part[1];
        if (Sc == 0.0f) continue;
        const float Mn = fmaxf(Mf, Mc);
        const float so = expf(Mf - Mn);
        const float sn = expf(Mc - Mn);
        const __m256 vso = _mm256_set1_ps(so), vsn = _mm256_set1_ps(sn);
        for (d = 0; d < h8; d += 8)
            _mm256_storeu_ps(fin + d, _mm256_fmadd_ps(_mm256_loadu_ps(fin + d), vso,
                                                      _mm256_mul_ps(_mm256_loadu_ps(part + 2 + d), vsn)));
        for (; d < hd; d++) fin[d] = fmaf(fin[d], so, part[2 + d] * sn);
        Sf = fmaf(Sf, so, Sc * sn);
        Mf = Mn;
    }
    if (Sf != 0.0f) {
        const float inv = 1.0f / Sf;
        for (d = 0; d < hd; d++) fin[d] = fin[d] * inv;
    }
    memcpy(m->att + head * hd, fin, hd * sizeof(float));
}

AVX_TARGET static void attn_job_avx(void *ctx, size_t r0, size_t r1, int worker)
{
    const attn_ctx *a = ctx;
    const attn_args *m = a->m;
    fw_scratch *s = &a->scr[worker];
    const size_t hd = m->head_dim, qd = m->q_dim;
    const size_t grp = m->n_head / m->n_head_kv;
    for (size_t j = r0; j < r1; j++) {
        if (a->path == 3) {
            const size_t head = j / a->n_tok, t = j % a->n_tok;
            typed_row(a, s, m->q + t * qd + head * hd, head / grp, a->first + t,
                      m->att + t * qd + head * hd);
        } else if (a->path == 2) {
            split_avx(a, s, j);
        } else if (a->path == 1) {
            const size_t head = j / a->nblocks, b = j % a->nblocks;
            const size_t t0 = b * FW_TILE;
            const size_t nr = a->n_tok - t0 < FW_TILE ? a->n_tok - t0 : FW_TILE;
            tiled_avx(a, s, head, t0, nr);
        } else {
            const size_t head = j / a->n_tok, t = j % a->n_tok;
            ref_row_avx(a, s, m->q + t * qd + head * hd, head / grp, a->first + t, 0, a->n_kv,
                        m->att + t * qd + head * hd, NULL);
        }
    }
}
#endif

/* ---- the driver --------------------------------------------------------------- */

void attn_scratch_free(attn_scratch *s)
{
    if (!s) return;
    for (int i = 0; s->w && i < s->n; i++) {
        fw_scratch *w = &s->w[i];
        free(w->kt); free(w->vt); free(w->kq); free(w->vkq);
        free(w->qt); free(w->ms); free(w->part); free(w->vkq16);
    }
    free(s->w);
    free(s);
}

attn_scratch *attn_scratch_new(int n_workers, size_t hd)
{
    attn_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n = n_workers > 0 ? n_workers : 1;
    s->w = calloc((size_t)s->n, sizeof *s->w);
    if (!s->w || hd == 0 || hd > ((size_t)1 << 20)) {
        attn_scratch_free(s);
        return NULL;
    }
    int fail = 0;
    for (int i = 0; i < s->n; i++) {
        fw_scratch *w = &s->w[i];
        w->kt = calloc(FW_TILE * hd, sizeof(float));
        w->vt = calloc(FW_TILE * hd, sizeof(float));
        w->kq = calloc(FW_TILE * FW_TILE, sizeof(float));
        w->vkq = calloc(FW_TILE * hd, sizeof(float));
        w->qt = calloc(hd, sizeof(float));
        w->ms = calloc(2 * FW_TILE, sizeof(float));
        w->part = calloc(2 + hd, sizeof(float));
        w->vkq16 = calloc(hd, sizeof(uint16_t));
        if (!w->kt || !w->vt || !w->kq || !w->vkq || !w->qt || !w->ms || !w->part || !w->vkq16)
            fail = 1;
    }
    if (fail) {
        attn_scratch_free(s);
        return NULL;
    }
    return s;
}

void attn_flash(par_pool *pool, int simd, const attn_args *args, attn_scratch *s)
{
    attn_ctx a = { args, s->w, (const uint16_t *)(const void *)args->kc,
                   (const uint16_t *)(const void *)args->vc, args->n_tok, args->first, args->n_kv, 0, 0 };
    const size_t n = args->n_tok;
    size_t jobs;
    if (args->tk != KVQ_F16 || args->tv != KVQ_F16) {
        a.path = 3;
        jobs = args->n_head * n;
    } else if (n == 1 && args->n_kv >= ATTN_SPLIT_KV_MIN) {
        a.path = 2;
        jobs = args->n_head;
    } else if (n >= FW_TILE && args->head_dim % 8 == 0) {
        a.path = 1;
        a.nblocks = (n + FW_TILE - 1) / FW_TILE;
        jobs = args->n_head * a.nblocks;
    } else {
        a.path = 0;
        jobs = args->n_head * n;
    }
#if FW_X86
    par_rows(pool, simd ? attn_job_avx : attn_job_c, &a, jobs, 1);
#else
    (void)simd;
    par_rows(pool, attn_job_c, &a, jobs, 1);
#endif
}
