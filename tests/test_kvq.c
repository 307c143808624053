/*
 * test_kvq.c -- the KV cache's row types (src/ops/kvq.c), the typed cache
 * (src/graph/kv.c) and attention over it (src/ops/attn.c): the table, the
 * rotation widths, the Hadamard butterflies and the reference quantizers on
 * blocks whose bytes are worked out by hand from ggml-base's
 * quantize_row_*_ref; bit-exactness against ggml itself is
 * testing/oracle_kernels_kvq.py's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "base/par.h"
#include "graph/kv.h"
#include "ops/attn.h"
#include "ops/f16.h"
#include "ops/kvq.h"
#include "ops/q8_0.h"

TEST(kvq_table_names_and_row_bytes)
{
    CHECK_STR(kvq_names(), "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1");
    kvq_type t = KVQ_COUNT;
    CHECK_INT(kvq_parse("q8_0", &t), 0);
    CHECK_INT(t, KVQ_Q8_0);
    CHECK_INT(kvq_parse("Q8_0", &t), -1);   /* llama-server compares exactly */
    CHECK_INT(kvq_parse("q8", &t), -1);
    CHECK_INT(kvq_parse(NULL, &t), -1);
    const size_t want[KVQ_COUNT] = {[KVQ_F16] = 256, [KVQ_F32] = 512, [KVQ_BF16] = 256, [KVQ_Q8_0] = 136,
                                    [KVQ_Q4_0] = 72, [KVQ_Q4_1] = 80, [KVQ_IQ4_NL] = 72, [KVQ_Q5_0] = 88,
                                    [KVQ_Q5_1] = 96};
    const uint32_t ggml[KVQ_COUNT] = {[KVQ_F16] = 1, [KVQ_F32] = 0, [KVQ_BF16] = 30, [KVQ_Q8_0] = 8, [KVQ_Q4_0] = 2,
                                      [KVQ_Q4_1] = 3, [KVQ_IQ4_NL] = 20, [KVQ_Q5_0] = 6, [KVQ_Q5_1] = 7};
    for (int i = 0; i < KVQ_COUNT; i++) {
        CHECK_U64(kvq_row_bytes((kvq_type)i, 128), want[i]);
        CHECK_U64(kvq_info_of((kvq_type)i)->ggml, ggml[i]);
        CHECK_INT(kvq_of_ggml(ggml[i]), i);
        CHECK_INT(kvq_info_of((kvq_type)i)->quantized, i >= KVQ_Q8_0);
    }
    CHECK_U64(kvq_row_bytes(KVQ_Q8_0, 40), 0);   /* not whole blocks */
    CHECK_U64(kvq_row_bytes(KVQ_F16, 40), 80);
    CHECK(kvq_info_of(KVQ_COUNT) == NULL);
    CHECK_INT(kvq_of_ggml(12), -1);
}

TEST(kvq_rotation_widths_as_b11669)
{
    CHECK_U64(kvq_rot_k(KVQ_Q8_0, 128, 0), 128);   /* the head: the largest power of two from 64 dividing it */
    CHECK_U64(kvq_rot_k(KVQ_Q8_0, 64, 0), 64);
    CHECK_U64(kvq_rot_k(KVQ_Q4_0, 256, 0), 256);
    CHECK_U64(kvq_rot_k(KVQ_Q4_0, 192, 0), 64);
    CHECK_U64(kvq_rot_k(KVQ_Q8_0, 96, 0), 0);      /* not a multiple of 64: none */
    CHECK_U64(kvq_rot_k(KVQ_Q8_0, 32, 0), 0);
    CHECK_U64(kvq_rot_k(KVQ_F16, 128, 0), 0);      /* float types: never */
    CHECK_U64(kvq_rot_k(KVQ_BF16, 128, 0), 0);
    CHECK_U64(kvq_rot_k(KVQ_Q8_0, 128, 1), 0);     /* LLAMA_ATTN_ROT_DISABLE */
    CHECK_U64(kvq_rot_v(KVQ_Q5_1, 128, 0), 64);    /* V: always 64 */
    CHECK_U64(kvq_rot_v(KVQ_Q5_1, 256, 0), 64);
    CHECK_U64(kvq_rot_v(KVQ_Q5_1, 96, 0), 0);
    CHECK_U64(kvq_rot_v(KVQ_F32, 128, 0), 0);
    CHECK_U64(kvq_rot_v(KVQ_Q8_0, 64, 1), 0);
}

TEST(kvq_fwht_butterflies)
{
    float x[128];
    memset(x, 0, sizeof x);
    x[5] = 1.0f;     /* run 0: e5, run 1: 2 e0 */
    x[64] = 2.0f;
    kvq_fwht(x, 128, 64);
    int bad = 0;
    for (int i = 0; i < 64; i++) {
        const float want = __builtin_popcount((unsigned)(i & 5)) & 1 ? -0.125f : 0.125f;
        bad += x[i] != want || x[64 + i] != 0.25f;
    }
    CHECK_INT(bad, 0);
    kvq_fwht(x, 128, 64);   /* H H = I, exact here */
    CHECK(x[5] == 1.0f && x[64] == 2.0f && x[0] == 0.0f && x[65] == 0.0f);
    float y[128];
    for (int i = 0; i < 128; i++) y[i] = 1.0f;
    kvq_fwht(y, 128, 128);   /* the scale 1/sqrtf(128) first, then 127 additions in a tree */
    const float s = 1.0f / sqrtf(128.0f);
    float lvl = s;
    for (int k = 0; k < 7; k++) lvl = lvl + lvl;
    CHECK(y[0] == lvl);
    CHECK(y[1] == 0.0f && y[127] == 0.0f);
}

/* little-endian u16 */
static unsigned rd16(const uint8_t *p) { return p[0] | p[1] << 8; }

TEST(kvq_reference_quantizers_by_hand)
{
    float x[32];
    uint8_t b[34];
    /* q4_0: x = j - 16: the largest magnitude is -16, d = -16 / -8 = 2, q = (int8)(x/2 + 8.5), capped at 15 */
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    kvq_from_float(KVQ_Q4_0, x, b, 32);
    CHECK_INT(rd16(b), 0x4000);
    int bad = 0;
    for (int j = 0; j < 16; j++) {
        const int q0 = (int)floorf(j / 2.0f + 0.5f), q1 = (int)floorf((j + 16) / 2.0f + 0.5f);
        bad += b[2 + j] != (q0 | (q1 > 15 ? 15 : q1) << 4);
    }
    CHECK_INT(bad, 0);
    CHECK_INT(b[2 + 15], 0xF8);   /* j = 15: q0 = 8; j = 31: 16 capped at 15 */
    /* q5_0: d = -16 / -16 = 1, q = (int8)(x + 16.5) = j; fifth bits set for j >= 16 */
    kvq_from_float(KVQ_Q5_0, x, b, 32);
    CHECK_INT(rd16(b), 0x3C00);
    CHECK_INT(b[2] | b[3] << 8 | b[4] << 16 | (unsigned)b[5] << 24, 0xFFFF0000u);
    bad = 0;
    for (int j = 0; j < 16; j++) bad += b[6 + j] != (j | j << 4);
    CHECK_INT(bad, 0);
    /* q4_1: x = j % 16: min 0, max 15, d = 1, m = 0, q = (int8)(x + 0.5) = x */
    for (int j = 0; j < 32; j++) x[j] = (float)(j % 16);
    kvq_from_float(KVQ_Q4_1, x, b, 32);
    CHECK_INT(rd16(b), 0x3C00);
    CHECK_INT(rd16(b + 2), 0);
    bad = 0;
    for (int j = 0; j < 16; j++) bad += b[4 + j] != (j | j << 4);
    CHECK_INT(bad, 0);
    /* q5_1: x = j + 1: min 1 (m = 0x3C00), max 32, d = 31/31 = 1, q = j */
    for (int j = 0; j < 32; j++) x[j] = (float)(j + 1);
    kvq_from_float(KVQ_Q5_1, x, b, 32);
    CHECK_INT(rd16(b), 0x3C00);
    CHECK_INT(rd16(b + 2), 0x3C00);
    CHECK_INT(b[4] | b[5] << 8 | b[6] << 16 | (unsigned)b[7] << 24, 0xFFFF0000u);
    bad = 0;
    for (int j = 0; j < 16; j++) bad += b[8 + j] != (j | j << 4);
    CHECK_INT(bad, 0);
    /* and back: to_float gives the values again (exact here) */
    float y[32];
    kvq_to_float(KVQ_Q5_1, b, y, 32);
    bad = 0;
    for (int j = 0; j < 32; j++) bad += y[j] != x[j];
    CHECK_INT(bad, 0);
    /* a zero block: d = 0.0f / -8 = -0.0f (f16 0x8000), id = 0, every q the offset */
    memset(x, 0, sizeof x);
    kvq_from_float(KVQ_Q4_0, x, b, 32);
    CHECK(rd16(b) == 0x8000 && b[2] == 0x88 && b[17] == 0x88);
}

/* iq4_nl (quantize_row_iq4_nl_ref: ntry -1, no scale searched): x = the
 * values themselves, so max = -127, d = -127 / -127 = 1, every code its own
 * index and d = sum(x^4) / sum(x^4) = 1; a tie between two values takes the
 * upper one; a zero block after it keeps its codes with d = 0. */
TEST(kvq_iq4_nl_by_hand)
{
    static const int v[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    float x[64] = {0}, y[64];
    uint8_t b[36];
    for (int j = 0; j < 32; j++) x[j] = (float)v[j % 16] * 0.5f;
    kvq_from_float(KVQ_IQ4_NL, x, b, 64);
    CHECK_INT(rd16(b), 0x3800);   /* d = 0.5 */
    int bad = 0;
    for (int j = 0; j < 16; j++) bad += b[2 + j] != (j | j << 4);
    CHECK_INT(bad, 0);
    CHECK_INT(rd16(b + 18), 0);                  /* the zero block: d = +0 ... */
    CHECK(memcmp(b + 20, b + 2, 16) == 0);       /* ... and the codes block 0 left */
    kvq_to_float(KVQ_IQ4_NL, b, y, 64);
    bad = 0;
    for (int j = 0; j < 64; j++) bad += y[j] != x[j];
    CHECK_INT(bad, 0);
    /* 7 is halfway between 1 and 13: the search gives 13 (code 9); -4.5 halfway between -10 and 1: code 8 */
    x[1] = 7.0f * 0.5f;
    x[2] = -4.5f * 0.5f;
    kvq_from_float(KVQ_IQ4_NL, x, b, 32);
    CHECK_INT(b[3] & 15, 9);
    CHECK_INT(b[4] & 15, 8);
    CHECK_INT(b[2] & 15, 0);
}

TEST(kv_typed_cache_bytes_and_round_trip)
{
    kv_cache kv;
    CHECK_INT(kv_init(&kv, 2, 256, 128, KVQ_Q8_0, KVQ_Q4_1), 0);
    CHECK_U64(kv.k_row, 136);
    CHECK_U64(kv.v_row, 80);
    CHECK_U64(kv_bytes(&kv, 10), 2 * 10 * (136 + 80));   /* the host prompt cache counts these */
    CHECK_U64(kv_bytes(&kv, 257), 0);
    float k[2 * 128], v[2 * 128];
    for (int i = 0; i < 256; i++) k[i] = v[i] = (float)(i % 7) - 3.0f;
    kv_write(&kv, 1, 3, k, v, 2);
    uint8_t row[136];
    kvq_from_float(KVQ_Q8_0, k + 128, row, 128);
    CHECK(memcmp(kv_layer_k(&kv, 1) + 4 * 136, row, 136) == 0);
    size_t n = kv_bytes(&kv, 5);
    uint8_t *buf = malloc(n);
    CHECK_INT(kv_save(&kv, 5, buf, n), 0);
    CHECK(memcmp(buf + 5 * (136 + 80) + 4 * 136, row, 136) == 0);   /* layer 1's K rows follow layer 0's V */
    kv_cache kv2;
    CHECK_INT(kv_init(&kv2, 2, 256, 128, KVQ_Q8_0, KVQ_Q4_1), 0);
    CHECK_INT(kv_restore(&kv2, 5, buf, n), 0);
    CHECK(memcmp(kv_layer_k(&kv2, 1), kv_layer_k(&kv, 1), 5 * 136) == 0);
    CHECK(memcmp(kv_layer_v(&kv2, 1), kv_layer_v(&kv, 1), 5 * 80) == 0);
    CHECK_INT(kv_restore(&kv2, 5, buf, n - 1), -1);
    free(buf);
    kv_free(&kv);
    kv_free(&kv2);
    CHECK_INT(kv_init(&kv, 2, 256, 128, KVQ_IQ4_NL, KVQ_F16), 0);
    CHECK_U64(kv_bytes(&kv, 3), 2 * 3 * (72 + 256));
    kv_free(&kv);
    CHECK_INT(kv_init(&kv, 2, 256, 40, KVQ_Q8_0, KVQ_F16), -1);      /* 40 is not whole blocks */
    CHECK_INT(kv_init(&kv, 2, 256, 40, KVQ_BF16, KVQ_F32), 0);
    CHECK_U64(kv_bytes(&kv, 1), 2 * (80 + 160));
    kv_free(&kv);
}

/* One visible cell: the softmax weight is 1, so the output is that cell's V
 * row as v_to_float reads it, for every V type (f32 accumulator or f16). */
TEST(attn_typed_one_cell_is_its_v_row)
{
    char err[128];
    par_pool *pool = par_create(1, err, sizeof err);
    CHECK(pool != NULL);
    if (!pool) return;
    attn_scratch *s = attn_scratch_new(1, 64);
    const kvq_type vt[] = {KVQ_Q8_0, KVQ_Q4_0, KVQ_Q4_1, KVQ_Q5_0, KVQ_Q5_1, KVQ_IQ4_NL, KVQ_BF16, KVQ_F16};
    float q[128], att[128], vrow[64], want[64];
    for (int i = 0; i < 128; i++) q[i] = (float)((i * 37) % 11) - 5.0f;
    for (int i = 0; i < 64; i++) vrow[i] = (float)((i * 13) % 17) * 0.37f - 2.0f;
    uint8_t *kc = calloc(256, 34 * 2), *vc = calloc(256, 256);
    kvq_from_float(KVQ_Q8_0, q, kc, 64);   /* cell 0's K: any row */
    int bad = 0;
    for (size_t t = 0; t < sizeof vt / sizeof vt[0]; t++) {
        const size_t vr = kvq_row_bytes(vt[t], 64);
        memset(vc, 0, 256 * 256);
        kvq_from_float(vt[t], vrow, vc, 64);
        kvq_to_float(vt[t], vc, want, 64);
        const attn_args a = {64, 2, 1, 128, 64, 0.125f, 2, q, att, kc, vc, KVQ_Q8_0, vt[t], 68, vr, 1, 0, 256, 0, NULL};
        attn_flash(pool, q8_simd(), &a, s);
        for (int h = 0; h < 2; h++)
            for (int d = 0; d < 64; d++) bad += att[h * 64 + d] != want[d];
    }
    CHECK_INT(bad, 0);
    free(kc);
    free(vc);
    attn_scratch_free(s);
    par_destroy(pool);
}

/* The window layers' cells as llama_kv_cache::find_slot (cont = false) and
 * apply_ubatch place them (no --swa-full): from the head, wrapping, a cell
 * reused once the window masks it for the next position, the purge of
 * positions at or below the highest one overwritten, seq_rm's head. */
TEST(kv_swa_cells_as_find_slot)
{
    kv_swa c;
    CHECK_INT(kv_swa_init(&c, 8, 4), 0);
    CHECK_INT(kv_swa_pos_min(&c), -1);
    CHECK_INT(kv_swa_place(&c, 3, 0, 4), 0);
    CHECK_INT(kv_swa_place(&c, 3, 4, 4), 0);
    CHECK_INT((int)c.head, 8);
    CHECK_INT(kv_swa_place(&c, 3, 8, 2), 0);   /* wraps: cells 0 and 1 hold 0 and 1, masked for 8 */
    CHECK_INT((int)c.idx[0], 0);
    CHECK_INT((int)c.idx[1], 1);
    CHECK_INT(kv_swa_place(&c, 3, 10, 3), 0);
    const int32_t want1[8] = {8, 9, 10, 11, 12, 5, 6, 7};
    int bad = 0;
    for (int i = 0; i < 8; i++) bad += c.pos[i] != want1[i];
    CHECK_INT(bad, 0);
    CHECK_INT((int)c.head, 5);
    CHECK_INT(kv_swa_pos_min(&c), 5);
    CHECK_INT(kv_swa_pos_max(&c), 12);
    CHECK_INT((int)kv_swa_n_kv(&c), 8);          /* max(256, ...) capped at the size */
    kv_swa_rm(&c, 11, -1);                         /* cells 3 and 4 freed: the head goes back to 3 */
    CHECK_INT((int)c.head, 3);
    CHECK_INT((int)c.used, 6);
    CHECK_INT(kv_swa_place(&c, 3, 11, 3), 0);    /* 3 and 4 empty, 5 (pos 5) masked for 11 */
    CHECK_INT((int)c.idx[2], 5);
    CHECK_INT((int)c.head, 6);
    CHECK_INT(kv_swa_place(&c, 3, 14, 4), 0);    /* 6, 7, then wrapping 0 (pos 8) and 1 (pos 9) */
    const uint32_t wantidx[4] = {6, 7, 0, 1};
    bad = 0;
    for (int i = 0; i < 4; i++) bad += c.idx[i] != wantidx[i];
    CHECK_INT(bad, 0);
    /* a cell overwritten above a position still held: the positions up to it are purged */
    const int32_t odd[8] = {0, 5, 6, 7, 1, 2, 3, 4};
    memcpy(c.pos, odd, sizeof odd);
    c.used = 8;
    c.head = 1;
    CHECK_INT(kv_swa_place(&c, 3, 8, 1), 0);     /* cell 1 (pos 5) reused: 0..4 purged */
    const int32_t want2[8] = {-1, 8, 6, 7, -1, -1, -1, -1};
    bad = 0;
    for (int i = 0; i < 8; i++) bad += c.pos[i] != want2[i];
    CHECK_INT(bad, 0);
    CHECK_INT((int)c.used, 3);
    CHECK_INT((int)c.head, 2);
    CHECK_INT(kv_swa_place(&c, 3, 9, 9), -1);    /* more tokens than the cells */
    /* a checkpoint's restore: every cell freed (the head back to the first), its cells placed from there */
    kv_swa_rm(&c, 0, -1);
    CHECK_INT((int)c.head, 1);
    CHECK_INT((int)c.used, 0);
    const int32_t saved[3] = {6, 7, 8};
    CHECK_INT(kv_swa_place_at(&c, 3, saved, 3), 0);
    const int32_t want3[8] = {-1, 6, 7, 8, -1, -1, -1, -1};
    bad = 0;
    for (int i = 0; i < 8; i++) bad += c.pos[i] != want3[i];
    CHECK_INT(bad, 0);
    CHECK_INT((int)c.head, 4);
    kv_swa_free(&c);
    CHECK_INT(kv_swa_init(&c, 4, 4), 0);
    CHECK_INT(kv_swa_place(&c, 8, 0, 4), 0);
    CHECK_INT(kv_swa_place(&c, 8, 4, 1), -1);    /* every cell still inside the window: no slot */
    CHECK_INT((int)c.head, 4);                     /* and nothing changed */
    kv_swa_free(&c);
}

/* cell_pos holding each cell's own position (and -1 past the used ones)
 * gives the bits of the position-order path, on the reference, tiled and
 * split-KV kernels, portable and AVX2, with and without a window. */
TEST(attn_cell_pos_identity_keeps_bits)
{
    char err[128];
    par_pool *pool = par_create(1, err, sizeof err);
    CHECK(pool != NULL);
    if (!pool) return;
    const size_t hd = 64, nkv = 512, nt = 100;
    attn_scratch *s = attn_scratch_new(1, hd);
    float *q = malloc(nt * 2 * hd * sizeof(float)), *a0 = malloc(nt * 2 * hd * sizeof(float)),
          *a1 = malloc(nt * 2 * hd * sizeof(float));
    uint16_t *kc = malloc(nkv * hd * 2), *vc = malloc(nkv * hd * 2);
    int32_t *cp = malloc(nkv * sizeof(int32_t));
    for (size_t i = 0; i < nt * 2 * hd; i++) q[i] = (float)((i * 37) % 23) * 0.05f - 0.5f;
    for (size_t i = 0; i < nkv * hd; i++) {
        kc[i] = f32_to_f16((float)((i * 13) % 29) * 0.03f - 0.4f);
        vc[i] = f32_to_f16((float)((i * 7) % 31) * 0.02f - 0.3f);
    }
    const struct { size_t n_tok, first, n_kv, n_swa; } cases[] = {
        {100, 156, 256, 0}, {100, 156, 256, 40}, {3, 300, 512, 128}, {1, 400, 512, 128}, {1, 400, 512, 0}};
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const size_t used = cases[c].first + cases[c].n_tok;
        for (size_t i = 0; i < nkv; i++) cp[i] = i < used ? (int32_t)i : -1;
        for (int simd = 0; simd <= q8_simd(); simd++) {
            attn_args a = {hd, 2, 1, 2 * hd, hd, 0.125f, 2, q, a0, (const uint8_t *)kc, (const uint8_t *)vc,
                           KVQ_F16, KVQ_F16, hd * 2, hd * 2, cases[c].n_tok, cases[c].first, cases[c].n_kv,
                           cases[c].n_swa, NULL};
            attn_flash(pool, simd, &a, s);
            a.att = a1;
            a.cell_pos = cp;
            attn_flash(pool, simd, &a, s);
            bad += memcmp(a0, a1, cases[c].n_tok * 2 * hd * sizeof(float)) != 0;
        }
    }
    CHECK_INT(bad, 0);
    free(q); free(a0); free(a1); free(kc); free(vc); free(cp);
    attn_scratch_free(s);
    par_destroy(pool);
}
