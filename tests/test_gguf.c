/*
 * test_gguf.c -- the guard's cases t1..t10 of testing/test_gguf_guard.py (as
 * the Rust gguf.rs mirrored them), the fail-closed cases, the type table,
 * lazy array decoding, checked spans and the map, and the two real models
 * under ../shared/models.
 *
 * Expected values: the synthetic cases are the Python suite's; the real
 * models' JSON is what gguf_guard.py --json printed for them (compared as
 * parsed JSON, then written here in the Rust's one-line form); token
 * strings, scores and the first weights are gguf-py's (oracle kit, b11669).
 */
#include "test.h"

#include "file/gguf.h"

#include <stdlib.h>
#include <unistd.h>

#include "file/ftype.h"

// ---------------------------------------------------------------------------
// a byte-buffer GGUF writer

typedef struct { uint8_t *p; size_t len, cap; } bb;

static void bb_put(bb *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) { fprintf(stderr, "test_gguf: out of memory\n"); exit(2); }
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void bb_u32(bb *b, uint32_t v)
{
    uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    bb_put(b, x, 4);
}

static void bb_u64(bb *b, uint64_t v)
{
    bb_u32(b, (uint32_t)v);
    bb_u32(b, (uint32_t)(v >> 32));
}

static void bb_strn(bb *b, const char *s, size_t n)
{
    bb_u64(b, n);
    bb_put(b, s, n);
}

static void bb_str(bb *b, const char *s) { bb_strn(b, s, strlen(s)); }

static void bb_zeros(bb *b, size_t n)
{
    static const uint8_t z[256];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        bb_put(b, z, k);
        n -= k;
    }
}

static void bb_pad(bb *b, size_t align) { bb_zeros(b, (align - b->len % align) % align); }

/* The GGUF preamble: magic, version 3, counts. */
static void bb_head(bb *b, uint64_t n_tensors, uint64_t n_kv)
{
    bb_put(b, "GGUF", 4);
    bb_u32(b, 3);
    bb_u64(b, n_tensors);
    bb_u64(b, n_kv);
}

static void kv_str(bb *b, const char *k, const char *v) { bb_str(b, k); bb_u32(b, GGUF_VT_STRING); bb_str(b, v); }
static void kv_u32(bb *b, const char *k, uint32_t v) { bb_str(b, k); bb_u32(b, GGUF_VT_U32); bb_u32(b, v); }
static void kv_u64(bb *b, const char *k, uint64_t v) { bb_str(b, k); bb_u32(b, GGUF_VT_U64); bb_u64(b, v); }

static void tensor(bb *b, const char *name, uint32_t nd, const uint64_t *dims, uint32_t type, uint64_t off)
{
    bb_str(b, name);
    bb_u32(b, nd);
    for (uint32_t i = 0; i < nd; i++) bb_u64(b, dims[i]);
    bb_u32(b, type);
    bb_u64(b, off);
}

typedef struct { const char *name; uint64_t n; uint32_t type; } tdesc;

/* test_gguf_guard.py's synthetic file: general.architecture "qwen3",
 * general.name, general.alignment U32 32; 1-D tensors whose blocks are
 * written with layout (per, bpb) for type 42 and ids >= 142, (1, 2)
 * otherwise; offsets aligned to 32; header padded to 32, then the data. */
static bb synth(const char *name, const tdesc *ts, size_t nt, uint64_t per, uint64_t bpb)
{
    bb b = { 0 };
    uint64_t off = 0;
    bb_head(&b, nt, 3);
    kv_str(&b, "general.architecture", "qwen3");
    kv_str(&b, "general.name", name);
    kv_u32(&b, "general.alignment", 32);
    for (size_t i = 0; i < nt; i++) {
        int blk = ts[i].type == 42 || ts[i].type >= 142;
        uint64_t sz = ts[i].n / (blk ? per : 1) * (blk ? bpb : 2);
        tensor(&b, ts[i].name, 1, &ts[i].n, ts[i].type, off);
        off += (sz + 31) / 32 * 32;
    }
    bb_pad(&b, 32);
    bb_zeros(&b, off);
    return b;
}

#define N_ELEM (4096 * 4)

static gguf_report judge_case(const char *name, const tdesc *ts, size_t nt, uint64_t per,
                              uint64_t bpb, gguf_engine e)
{
    gguf_report r;
    bb b = synth(name, ts, nt, per, bpb);
    CHECK_INT(gguf_judge(b.p, b.len, e, (int64_t)b.len, name, &r), 0);
    free(b.p);
    return r;
}

static const char *json_of(const gguf_report *r, jbuf *j)
{
    jbuf_reset(j);
    gguf_report_json(r, j);
    return j->p;
}

static const char *text_of(const gguf_report *r, jbuf *j)
{
    jbuf_reset(j);
    gguf_report_text(r, j);
    return j->p;
}

static const char *LEGACY =
    "2 Q2_0 tensors smaller than group-64 layout: legacy group-128 Prism file, "
    "use *-Q2_0_g64.gguf or *-PQ2_0.gguf";
static const char *FORK = "PQ2_0/PTQ1_0 are PrismML-fork types; mainline and llama.rn refuse them";
static const char *ROTATED =
    "Bonsai 2 weights are in a rotated basis and need the fork's Hadamard transform; "
    "mainline loads the Q2_0 band silently and outputs gibberish";

// ---------------------------------------------------------------------------
// t1..t10

TEST(gguf_t1_q1_0_plays_on_mainline)
{
    tdesc ts[] = { { "a", N_ELEM, 41 }, { "b", N_ELEM, 1 } };
    gguf_report r = judge_case("Bonsai-1.7B", ts, 2, 128, 18, GGUF_ENGINE_MAINLINE);
    jbuf j;
    jbuf_init(&j);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    CHECK_INT(r.n_types, 2);
    CHECK_INT(r.types[0].id, 1);
    CHECK_U64(r.types[0].count, 1);
    CHECK_INT(r.types[1].id, 41);
    CHECK_U64(r.types[1].count, 1);
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 3, \"arch\": \"qwen3\", \"name\": \"Bonsai-1.7B\", \"tensors\": 2, "
              "\"types\": {\"F16\": 1, \"Q1_0\": 1}, \"engine\": \"mainline\", \"reasons\": [], "
              "\"verdict\": \"play\"}");
    CHECK_STR(text_of(&r, &j), "play F16:1 Q1_0:1\n");
    jbuf_free(&j);
    gguf_report_free(&r);
}

TEST(gguf_t2_q2_0_g64_plays_on_mainline)
{
    tdesc ts[] = { { "a", N_ELEM, 42 }, { "b", N_ELEM, 42 } };
    gguf_report r = judge_case("Ternary-Bonsai-1.7B", ts, 2, 64, 18, GGUF_ENGINE_MAINLINE);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    CHECK_INT(r.n_reasons, 0);
    CHECK_INT(r.n_types, 1);
    CHECK_U64(r.types[0].count, 2);
    gguf_report_free(&r);
}

TEST(gguf_t3_legacy_g128_refused_by_size)
{
    tdesc ts[] = { { "a", N_ELEM, 42 }, { "b", N_ELEM, 42 } };
    gguf_report r = judge_case("Ternary-Bonsai-1.7B", ts, 2, 128, 34, GGUF_ENGINE_MAINLINE);
    jbuf j;
    jbuf_init(&j);
    CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
    CHECK_INT(r.n_reasons, 1);
    if (r.n_reasons) CHECK_STR(r.reasons[0].text, LEGACY);
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 3, \"arch\": \"qwen3\", \"name\": \"Ternary-Bonsai-1.7B\", "
              "\"tensors\": 2, \"types\": {\"Q2_0\": 2}, \"engine\": \"mainline\", \"reasons\": "
              "[\"2 Q2_0 tensors smaller than group-64 layout: legacy group-128 Prism file, use "
              "*-Q2_0_g64.gguf or *-PQ2_0.gguf\"], \"verdict\": \"refuse\"}");
    CHECK_STR(text_of(&r, &j),
              "refuse Q2_0:2\n  - 2 Q2_0 tensors smaller than group-64 layout: legacy group-128 "
              "Prism file, use *-Q2_0_g64.gguf or *-PQ2_0.gguf\n");
    jbuf_free(&j);
    gguf_report_free(&r);
}

TEST(gguf_t4_pq2_0_refused_on_mainline)
{
    tdesc ts[] = { { "a", N_ELEM, 142 } };
    gguf_report r = judge_case("Ternary-Bonsai-1.7B", ts, 1, 128, 34, GGUF_ENGINE_MAINLINE);
    CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
    CHECK_INT(r.n_reasons, 1);
    if (r.n_reasons) CHECK_STR(r.reasons[0].text, FORK);
    gguf_report_free(&r);
}

TEST(gguf_t5_pq2_0_plays_on_prism)
{
    tdesc ts[] = { { "a", N_ELEM, 142 } };
    gguf_report r = judge_case("Ternary-Bonsai-1.7B", ts, 1, 128, 34, GGUF_ENGINE_PRISM);
    jbuf j;
    jbuf_init(&j);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 3, \"arch\": \"qwen3\", \"name\": \"Ternary-Bonsai-1.7B\", "
              "\"tensors\": 1, \"types\": {\"PQ2_0\": 1}, \"engine\": \"prism\", \"reasons\": [], "
              "\"verdict\": \"play\"}");
    jbuf_free(&j);
    gguf_report_free(&r);
}

TEST(gguf_t6_bonsai2_refused_on_mainline_by_name)
{
    tdesc ts[] = { { "a", N_ELEM, 42 } };
    gguf_report r = judge_case("Ternary Bonsai 2 27B", ts, 1, 64, 18, GGUF_ENGINE_MAINLINE);
    CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
    CHECK_INT(r.n_reasons, 1);
    if (r.n_reasons) CHECK_STR(r.reasons[0].text, ROTATED);
    gguf_report_free(&r);
}

TEST(gguf_t7_bonsai2_plays_on_prism)
{
    tdesc ts[] = { { "a", N_ELEM, 42 } };
    gguf_report r = judge_case("Ternary Bonsai 2 27B", ts, 1, 64, 18, GGUF_ENGINE_PRISM);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    CHECK_INT(r.n_reasons, 0);
    gguf_report_free(&r);
}

/* The Python test's construction: four KVs spliced in after the preamble. */
TEST(gguf_t8_kv_bytes_per_token_qwen3_8b_shape)
{
    tdesc ts[] = { { "a", N_ELEM, 41 } };
    bb b = synth("Bonsai-8B", ts, 1, 128, 18), raw = { 0 };
    gguf_report r;
    jbuf j;
    bb_put(&raw, b.p, 16);
    bb_u64(&raw, 3 + 4);
    kv_str(&raw, "general.architecture", "qwen3");
    kv_u32(&raw, "qwen3.block_count", 36);
    kv_u32(&raw, "qwen3.attention.head_count_kv", 8);
    kv_u32(&raw, "qwen3.attention.key_length", 128);
    bb_put(&raw, b.p + 24, b.len - 24);
    CHECK_INT(gguf_judge(raw.p, raw.len, GGUF_ENGINE_MAINLINE, -1, "Bonsai-8B", &r), 0);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    CHECK_INT(r.has_kv_bytes, 1);
    CHECK_INT((long long)r.kv_f16_bytes_per_token, 147456);
    jbuf_init(&j);
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 3, \"arch\": \"qwen3\", \"name\": \"Bonsai-8B\", \"tensors\": 1, "
              "\"types\": {\"Q1_0\": 1}, \"engine\": \"mainline\", \"reasons\": [], "
              "\"kv_f16_bytes_per_token\": 147456, \"verdict\": \"play\"}");
    jbuf_free(&j);
    gguf_report_free(&r);
    free(b.p);
    free(raw.p);
}

TEST(gguf_t9_truncated_prefix_needs_more)
{
    tdesc ts[] = { { "a", N_ELEM, 42 } };
    bb b = synth("x", ts, 1, 64, 18);
    gguf_report r;
    jbuf j;
    CHECK_INT(gguf_judge(b.p, 40, GGUF_ENGINE_MAINLINE, -1, "", &r), 0);
    CHECK_INT(r.verdict, GGUF_VERDICT_NEED_MORE);
    /* the key "general.architecture" (8 + 20 bytes from offset 24) */
    CHECK_U64(r.bytes_needed, 52);
    jbuf_init(&j);
    CHECK_STR(json_of(&r, &j), "{\"verdict\": \"need_more\", \"bytes_needed\": 52}");
    CHECK_STR(text_of(&r, &j), "need_more \n");
    jbuf_free(&j);
    gguf_report_free(&r);
    free(b.p);
}

TEST(gguf_t10_standard_k_quant_model_plays_on_mainline)
{
    tdesc ts[] = { { "a", N_ELEM, 12 }, { "b", N_ELEM, 14 }, { "c", N_ELEM, 0 } };
    gguf_report r = judge_case("Qwen3-8B-Q4_K_M", ts, 3, 64, 18, GGUF_ENGINE_MAINLINE);
    jbuf j;
    jbuf_init(&j);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    CHECK_STR(text_of(&r, &j), "play F32:1 Q4_K:1 Q6_K:1\n");
    jbuf_free(&j);
    gguf_report_free(&r);
}

// ---------------------------------------------------------------------------
// fail-closed cases

/* A header with the given KV entries (already encoded) and no tensors. */
static bb raw_kv(const bb *entries, uint64_t n_kv)
{
    bb h = { 0 };
    bb_head(&h, 0, n_kv);
    bb_put(&h, entries->p, entries->len);
    bb_pad(&h, 32);
    bb_zeros(&h, 32);
    return h;
}

static gguf_report judge_bb(const bb *b, gguf_engine e, const char *fname)
{
    gguf_report r;
    CHECK_INT(gguf_judge(b->p, b->len, e, -1, fname, &r), 0);
    return r;
}

static void check_refuses(const bb *b, const char *reason)
{
    gguf_report r = judge_bb(b, GGUF_ENGINE_MAINLINE, "");
    CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
    CHECK_INT(r.n_reasons, 1);
    if (r.n_reasons) CHECK_STR(r.reasons[0].text, reason);
    gguf_report_free(&r);
}

TEST(gguf_bad_magic_refuses)
{
    gguf_report r;
    jbuf j;
    CHECK_INT(gguf_judge((const uint8_t *)"GGUX\x03\0\0\0", 8, GGUF_ENGINE_MAINLINE, -1, "", &r), 0);
    CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
    jbuf_init(&j);
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 0, \"arch\": null, \"name\": null, \"tensors\": 0, \"types\": {}, "
              "\"engine\": \"mainline\", \"reasons\": [\"not a GGUF file\"], \"verdict\": \"refuse\"}");
    CHECK_STR(text_of(&r, &j), "refuse \n  - not a GGUF file\n");
    jbuf_free(&j);
    gguf_report_free(&r);
    /* fewer than 4 bytes is not yet a verdict on the magic */
    CHECK_INT(gguf_judge((const uint8_t *)"GG", 2, GGUF_ENGINE_MAINLINE, -1, "", &r), 0);
    CHECK_INT(r.verdict, GGUF_VERDICT_NEED_MORE);
    CHECK_U64(r.bytes_needed, 4);
    gguf_report_free(&r);
}

TEST(gguf_unknown_value_type_refuses)
{
    bb e = { 0 }, h;
    bb_str(&e, "x");
    bb_u32(&e, 13);
    h = raw_kv(&e, 1);
    check_refuses(&h, "unknown gguf value type 13");
    free(h.p);
    /* an array of an unknown element type is fine while empty ... */
    e.len = 0;
    bb_str(&e, "x");
    bb_u32(&e, GGUF_VT_ARRAY);
    bb_u32(&e, 99);
    bb_u64(&e, 0);
    h = raw_kv(&e, 1);
    {
        gguf_report r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
        CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
        gguf_report_free(&r);
    }
    free(h.p);
    /* ... and refuses once it has an element to decode */
    e.p[e.len - 8] = 1;
    h = raw_kv(&e, 1);
    check_refuses(&h, "unknown gguf value type 99");
    free(h.p);
    free(e.p);
}

/* d array headers (ARRAY, 1), then an empty U32 array at depth d. */
static bb nested(size_t d)
{
    bb e = { 0 }, h;
    bb_str(&e, "a");
    bb_u32(&e, GGUF_VT_ARRAY);
    for (size_t i = 0; i < d; i++) { bb_u32(&e, GGUF_VT_ARRAY); bb_u64(&e, 1); }
    bb_u32(&e, GGUF_VT_U32);
    bb_u64(&e, 0);
    h = raw_kv(&e, 1);
    free(e.p);
    return h;
}

TEST(gguf_deeply_nested_arrays_refuse_not_crash)
{
    static const size_t plays[] = { 0, 3, 64 };
    for (size_t i = 0; i < 3; i++) {
        bb h = nested(plays[i]);
        gguf_report r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
        CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
        gguf_report_free(&r);
        free(h.p);
    }
    bb h = nested(65);
    check_refuses(&h, "gguf arrays nested deeper than 64");
    free(h.p);
    h = nested(2000000);                       /* 24 MB of header */
    check_refuses(&h, "gguf arrays nested deeper than 64");
    free(h.p);
}

TEST(gguf_kv_size_overflow_refuses)
{
    bb e = { 0 }, h;
    gguf_report r;
    kv_str(&e, "general.architecture", "qwen3");
    kv_u64(&e, "qwen3.block_count", UINT64_MAX);
    kv_u64(&e, "qwen3.attention.head_count_kv", UINT64_MAX);
    kv_u64(&e, "qwen3.attention.key_length", UINT64_MAX);
    h = raw_kv(&e, 4);
    r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
    CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
    CHECK_INT(r.has_kv_bytes, 0);
    CHECK_INT(r.n_reasons, 1);
    if (r.n_reasons)
        CHECK_STR(r.reasons[0].text, "KV cache size per token overflows (qwen3.block_count \xC3\x97 "
                                     "head_count_kv \xC3\x97 key/value length): malformed header");
    gguf_report_free(&r);
    free(h.p);
    free(e.p);
}

TEST(gguf_alignment_rules)
{
    static const struct { uint32_t vt; uint64_t bits; int nbytes; const char *reason; uint64_t align; } c[] = {
        { GGUF_VT_U32, 0, 4, "general.alignment 0 is not a positive integer", 0 },
        { GGUF_VT_I32, 0xFFFFFFFF, 4, "general.alignment -1 is not a positive integer", 0 },
        { GGUF_VT_F32, 0x3F000000, 4, "general.alignment 0.5 is not a positive integer", 0 },
        { GGUF_VT_BOOL, 0, 1, "general.alignment False is not a positive integer", 0 },
        { GGUF_VT_BOOL, 1, 1, NULL, 1 },
        { GGUF_VT_F32, 0x4281CCCD, 4, NULL, 64 },          /* 64.9 truncates */
        { GGUF_VT_F64, 0x7FF0000000000000ull, 8, NULL, UINT64_MAX },   /* inf saturates */
        { GGUF_VT_U64, 64, 8, NULL, 64 },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        bb e = { 0 }, h;
        uint8_t v[8];
        gguf_report r;
        for (int k = 0; k < 8; k++) v[k] = (uint8_t)(c[i].bits >> (8 * k));
        bb_str(&e, "general.alignment");
        bb_u32(&e, c[i].vt);
        bb_put(&e, v, (size_t)c[i].nbytes);
        h = raw_kv(&e, 1);
        r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
        if (c[i].reason) {
            CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
            if (r.n_reasons) CHECK_STR(r.reasons[0].text, c[i].reason);
        } else {
            CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
            CHECK_U64(r.header.alignment, c[i].align);
        }
        gguf_report_free(&r);
        free(h.p);
        free(e.p);
    }
    /* a string is not a number */
    {
        bb e = { 0 }, h;
        kv_str(&e, "general.alignment", "64");
        h = raw_kv(&e, 1);
        check_refuses(&h, "general.alignment 64 is not a positive integer");
        free(h.p);
        free(e.p);
    }
}

TEST(gguf_unknown_type_ids_refuse_on_both_engines)
{
    tdesc one[] = { { "a", N_ELEM, 77 } };
    tdesc two[] = { { "a", N_ELEM, 200 }, { "b", N_ELEM, 77 }, { "c", N_ELEM, 143 }, { "d", N_ELEM, 77 } };
    gguf_report r = judge_case("x", one, 1, 64, 18, GGUF_ENGINE_PRISM);
    jbuf j;
    CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
    CHECK_INT(r.n_reasons, 1);
    if (r.n_reasons) CHECK_STR(r.reasons[0].text, "type ids [77] unknown to every build this guard knows");
    gguf_report_free(&r);
    r = judge_case("x", two, 4, 64, 18, GGUF_ENGINE_MAINLINE);
    CHECK_INT(r.n_reasons, 2);
    if (r.n_reasons == 2) {
        CHECK_STR(r.reasons[0].text, "type ids [77, 200] unknown to every build this guard knows");
        CHECK_STR(r.reasons[1].text, FORK);
    }
    jbuf_init(&j);
    CHECK_STR(text_of(&r, &j),
              "refuse 77:2 PTQ1_0:1 200:1\n  - type ids [77, 200] unknown to every build this guard "
              "knows\n  - PQ2_0/PTQ1_0 are PrismML-fork types; mainline and llama.rn refuse them\n");
    jbuf_free(&j);
    gguf_report_free(&r);
    /* 40 (NVFP4) is below GGML_TYPE_COUNT: named, and it plays */
    tdesc nv[] = { { "a", N_ELEM, 40 } };
    r = judge_case("x", nv, 1, 64, 18, GGUF_ENGINE_MAINLINE);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    gguf_report_free(&r);
}

/* Number of reasons a name gets on mainline (file name "m.gguf"). */
static int name_reasons(const char *name, gguf_engine e)
{
    tdesc ts[] = { { "a", N_ELEM, 0 } };
    bb b = synth(name, ts, 1, 64, 18);
    gguf_report r;
    int n;
    CHECK_INT(gguf_judge(b.p, b.len, e, (int64_t)b.len, "m.gguf", &r), 0);
    n = (int)r.n_reasons;
    if (n) CHECK_STR(r.reasons[0].text, ROTATED);
    gguf_report_free(&r);
    free(b.p);
    return n;
}

TEST(gguf_bonsai2_label_as_python_re)
{
    CHECK_INT(name_reasons("Bonsai_-  2", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("x PRISM-FORK-REQUIRED", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("Bonsai-1.7B", GGUF_ENGINE_MAINLINE), 0);
    CHECK_INT(name_reasons("Bonsai-8B-2x", GGUF_ENGINE_MAINLINE), 0);
    CHECK_INT(name_reasons("bonsai", GGUF_ENGINE_MAINLINE), 0);
    CHECK_INT(name_reasons("Bonsai_-  2", GGUF_ENGINE_PRISM), 0);
    /* Python's re.I and \s reach past ASCII: long s, dotted/dotless i,
     * Kelvin sign, NBSP, U+001C, U+2028 */
    CHECK_INT(name_reasons("BON\xC5\xBF" "A\xC4\xB0 2", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("bonsa\xC4\xB1" "2", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("prism-fork-required", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("prism-for\xE2\x84\xAA-required", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("bonsai\xC2\xA0" "2", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("bonsai\x1C" "2", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("bonsai\xE2\x80\xA8" "2", GGUF_ENGINE_MAINLINE), 1);
    CHECK_INT(name_reasons("bonsai\xE2\x80\x8B" "2", GGUF_ENGINE_MAINLINE), 0);   /* ZWSP is not \s */
    /* invalid UTF-8 becomes U+FFFD, which breaks the run */
    CHECK_INT(name_reasons("bonsai\xFF" "2", GGUF_ENGINE_MAINLINE), 0);
}

TEST(gguf_bonsai2_label_parts)
{
    tdesc ts[] = { { "a", N_ELEM, 0 } };
    bb b = synth("x", ts, 1, 64, 18);
    gguf_report r;
    /* the file name alone */
    CHECK_INT(gguf_judge(b.p, b.len, GGUF_ENGINE_MAINLINE, -1, "Bonsai-2-8B.gguf", &r), 0);
    CHECK_INT(r.n_reasons, 1);
    gguf_report_free(&r);
    /* "x" + " " + "2..." does not join into a match; NULL file name is fine */
    CHECK_INT(gguf_judge(b.p, b.len, GGUF_ENGINE_MAINLINE, -1, NULL, &r), 0);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    gguf_report_free(&r);
    free(b.p);
    /* general.basename counts; a name "bonsai" and a file name "2" join to
     * "bonsai 2", as the Python's " ".join does */
    bb e = { 0 }, h;
    kv_str(&e, "general.name", "bonsai");
    kv_str(&e, "general.basename", "");
    h = raw_kv(&e, 2);
    CHECK_INT(gguf_judge(h.p, h.len, GGUF_ENGINE_MAINLINE, -1, "2", &r), 0);
    CHECK_INT(r.n_reasons, 1);
    gguf_report_free(&r);
    free(h.p);
    e.len = 0;
    kv_str(&e, "general.basename", "Ternary-Bonsai-2");
    h = raw_kv(&e, 1);
    CHECK_INT(gguf_judge(h.p, h.len, GGUF_ENGINE_MAINLINE, -1, "", &r), 0);
    CHECK_INT(r.n_reasons, 1);
    gguf_report_free(&r);
    free(h.p);
    free(e.p);
}

/* Values print as Python's str(); duplicate keys: the last wins. */
TEST(gguf_python_str_of_values)
{
    bb e = { 0 }, h;
    gguf_report r;
    jbuf j;
    kv_str(&e, "general.architecture", "first");
    bb_str(&e, "general.architecture");
    bb_u32(&e, GGUF_VT_BOOL);
    bb_put(&e, "\x01", 1);
    bb_str(&e, "general.name");
    bb_u32(&e, GGUF_VT_F32);
    bb_u32(&e, 0x3DCCCCCD);                    /* 0.1f */
    h = raw_kv(&e, 3);
    r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
    jbuf_init(&j);
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 3, \"arch\": \"True\", \"name\": \"0.10000000149011612\", "
              "\"tensors\": 0, \"types\": {}, \"engine\": \"mainline\", \"reasons\": [], "
              "\"verdict\": \"play\"}");
    gguf_report_free(&r);
    free(h.p);
    /* arrays, negative integers, floats in exponent form, invalid UTF-8 */
    e.len = 0;
    bb_str(&e, "general.architecture");
    bb_u32(&e, GGUF_VT_ARRAY);
    bb_u32(&e, GGUF_VT_U8);
    bb_u64(&e, 3);
    bb_put(&e, "abc", 3);
    bb_str(&e, "general.name");
    bb_u32(&e, GGUF_VT_F64);
    bb_u64(&e, 0x3EE4F8B588E368F1ull);          /* 1e-05 */
    h = raw_kv(&e, 2);
    r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
    CHECK_STR(r.arch, "<array 3>");
    CHECK_STR(r.name, "1e-05");
    gguf_report_free(&r);
    free(h.p);
    e.len = 0;
    bb_str(&e, "general.architecture");
    bb_u32(&e, GGUF_VT_I16);
    bb_put(&e, "\xFB\xFF", 2);                 /* -5 */
    bb_str(&e, "general.name");
    bb_u32(&e, GGUF_VT_STRING);
    bb_strn(&e, "a\xC3\"\n\x01", 5);
    h = raw_kv(&e, 2);
    r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 3, \"arch\": \"-5\", \"name\": \"a\xEF\xBF\xBD\\\"\\n\\u0001\", "
              "\"tensors\": 0, \"types\": {}, \"engine\": \"mainline\", \"reasons\": [], "
              "\"verdict\": \"play\"}");
    jbuf_free(&j);
    gguf_report_free(&r);
    free(h.p);
    free(e.p);
}

TEST(gguf_kv_bytes_fallback_and_per_layer)
{
    bb e = { 0 }, h;
    gguf_report r;
    jbuf j;
    /* embedding_length // head_count as the head size; Python floors */
    kv_str(&e, "general.architecture", "llama");
    kv_u32(&e, "llama.block_count", 1);
    kv_u32(&e, "llama.attention.head_count_kv", 1);
    bb_str(&e, "llama.embedding_length");
    bb_u32(&e, GGUF_VT_I32);
    bb_u32(&e, (uint32_t)-7);
    kv_u32(&e, "llama.attention.head_count", 2);
    kv_u32(&e, "llama.attention.value_length", 1000);   /* overridden by the fallback */
    h = raw_kv(&e, 6);
    r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
    CHECK_INT(r.has_kv_bytes, 1);
    CHECK_INT((long long)r.kv_f16_bytes_per_token, -16);
    jbuf_init(&j);
    CHECK(strstr(json_of(&r, &j), "\"kv_f16_bytes_per_token\": -16, ") != NULL);
    jbuf_free(&j);
    gguf_report_free(&r);
    free(h.p);
    /* head_count 0: no fallback, so no figure (the Python would crash) */
    e.len = 0;
    kv_str(&e, "general.architecture", "llama");
    kv_u32(&e, "llama.block_count", 1);
    kv_u32(&e, "llama.attention.head_count_kv", 1);
    kv_u32(&e, "llama.embedding_length", 64);
    kv_u32(&e, "llama.attention.head_count", 0);
    h = raw_kv(&e, 5);
    r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
    CHECK_INT(r.has_kv_bytes, 0);
    CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
    gguf_report_free(&r);
    free(h.p);
    /* per-layer head counts (an array): no figure */
    e.len = 0;
    kv_u32(&e, "None.block_count", 2);          /* no architecture: keys are "None.*" */
    bb_str(&e, "None.attention.head_count_kv");
    bb_u32(&e, GGUF_VT_ARRAY);
    bb_u32(&e, GGUF_VT_U32);
    bb_u64(&e, 2);
    bb_u32(&e, 8);
    bb_u32(&e, 4);
    kv_u32(&e, "None.attention.key_length", 64);
    h = raw_kv(&e, 3);
    r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
    CHECK_INT(r.has_kv_bytes, 0);
    gguf_report_free(&r);
    free(h.p);
    /* ... and with a scalar the "None." keys do count; value_length used */
    e.len = 0;
    kv_u32(&e, "None.block_count", 2);
    kv_u32(&e, "None.attention.head_count_kv", 3);
    kv_u32(&e, "None.attention.key_length", 64);
    kv_u32(&e, "None.attention.value_length", 32);
    h = raw_kv(&e, 4);
    r = judge_bb(&h, GGUF_ENGINE_MAINLINE, "");
    CHECK_INT((long long)r.kv_f16_bytes_per_token, 2 * 3 * (64 + 32) * 2);
    gguf_report_free(&r);
    free(h.p);
    free(e.p);
}

/* The last tensor's room is only known with a file size. */
TEST(gguf_legacy_q2_0_needs_file_size_for_last)
{
    tdesc ts[] = { { "a", N_ELEM, 42 }, { "b", N_ELEM, 42 } };
    bb b = synth("x", ts, 2, 128, 34);
    gguf_report r;
    CHECK_INT(gguf_judge(b.p, b.len, GGUF_ENGINE_MAINLINE, -1, "", &r), 0);
    CHECK_INT(r.n_reasons, 1);
    if (r.n_reasons)
        CHECK_STR(r.reasons[0].text, "1 Q2_0 tensors smaller than group-64 layout: legacy group-128 "
                                     "Prism file, use *-Q2_0_g64.gguf or *-PQ2_0.gguf");
    gguf_report_free(&r);
    /* a file size of 0 counts (Rust), leaving negative room */
    CHECK_INT(gguf_judge(b.p, b.len, GGUF_ENGINE_MAINLINE, 0, "", &r), 0);
    if (r.n_reasons) CHECK_STR(r.reasons[0].text, LEGACY);
    gguf_report_free(&r);
    free(b.p);
}

/* Python's NeedMore arithmetic: how far the failed read wanted to go. */
TEST(gguf_need_more_offsets)
{
    bb h = { 0 };
    gguf_report r;
    jbuf j;
    bb_head(&h, 0, 1);
    bb_u64(&h, UINT64_MAX);                    /* a key length that overflows */
    CHECK_INT(gguf_judge(h.p, h.len, GGUF_ENGINE_MAINLINE, -1, "", &r), 0);
    CHECK_INT(r.verdict, GGUF_VERDICT_NEED_MORE);
    CHECK_U64(r.bytes_needed, UINT64_MAX);
    jbuf_init(&j);
    CHECK_STR(json_of(&r, &j), "{\"verdict\": \"need_more\", \"bytes_needed\": 18446744073709551615}");
    jbuf_free(&j);
    gguf_report_free(&r);
    h.len = 0;
    bb_head(&h, 0, 1);
    bb_str(&h, "k");
    bb_u32(&h, GGUF_VT_ARRAY);
    bb_u32(&h, GGUF_VT_U16);
    bb_u64(&h, 1000);                          /* 2000 bytes it does not have */
    CHECK_INT(gguf_judge(h.p, h.len, GGUF_ENGINE_MAINLINE, -1, "", &r), 0);
    CHECK_U64(r.bytes_needed, h.len + 2000);
    gguf_report_free(&r);
    /* counts are never trusted for allocation */
    h.len = 0;
    bb_head(&h, UINT64_MAX, UINT64_MAX);
    CHECK_INT(gguf_judge(h.p, h.len, GGUF_ENGINE_MAINLINE, -1, "", &r), 0);
    CHECK_INT(r.verdict, GGUF_VERDICT_NEED_MORE);
    CHECK_U64(r.bytes_needed, 32);
    gguf_report_free(&r);
    free(h.p);
}

/* A header with one of everything: every strict prefix of it needs more
 * bytes, and says how many within the header; the whole header plays. */
TEST(gguf_every_truncated_prefix_needs_more)
{
    bb b = { 0 };
    uint64_t dims[2] = { 64, 3 }, d1 = 128, header_end;
    bb_head(&b, 2, 7);
    kv_str(&b, "general.architecture", "qwen3");
    kv_str(&b, "general.name", "Bonsai-1.7B");
    kv_u32(&b, "general.alignment", 32);
    bb_str(&b, "strings");
    bb_u32(&b, GGUF_VT_ARRAY);
    bb_u32(&b, GGUF_VT_STRING);
    bb_u64(&b, 3);
    bb_str(&b, "a");
    bb_str(&b, "bc");
    bb_str(&b, "");
    bb_str(&b, "nested");
    bb_u32(&b, GGUF_VT_ARRAY);
    bb_u32(&b, GGUF_VT_ARRAY);
    bb_u64(&b, 2);
    bb_u32(&b, GGUF_VT_U32); bb_u64(&b, 2); bb_u32(&b, 1); bb_u32(&b, 2);
    bb_u32(&b, GGUF_VT_STRING); bb_u64(&b, 1); bb_str(&b, "z");
    bb_str(&b, "f");
    bb_u32(&b, GGUF_VT_F64);
    bb_u64(&b, 0);
    bb_str(&b, "b");
    bb_u32(&b, GGUF_VT_BOOL);
    bb_put(&b, "\x01", 1);
    tensor(&b, "w", 2, dims, 42, 0);
    tensor(&b, "v", 1, &d1, 41, 64);
    header_end = b.len;
    bb_pad(&b, 32);
    bb_zeros(&b, 96);
    for (size_t k = 0; k < header_end; k++) {
        gguf_report r;
        if (gguf_judge(b.p, k, GGUF_ENGINE_MAINLINE, -1, "", &r) != 0 ||
            r.verdict != GGUF_VERDICT_NEED_MORE || r.bytes_needed <= k ||
            r.bytes_needed > header_end) {
            test_fail(__FILE__, __LINE__, "prefix %zu: verdict %d, bytes_needed %llu", k,
                      (int)r.verdict, (unsigned long long)r.bytes_needed);
            gguf_report_free(&r);
            break;
        }
        gguf_report_free(&r);
    }
    for (size_t k = header_end; k <= b.len; k++) {
        gguf_report r;
        CHECK_INT(gguf_judge(b.p, k, GGUF_ENGINE_MAINLINE, (int64_t)b.len, "", &r), 0);
        CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
        CHECK_U64(r.header.header_end, header_end);
        CHECK_U64(r.header.data_start, (header_end + 31) / 32 * 32);
        gguf_report_free(&r);
    }
    free(b.p);
}

// ---------------------------------------------------------------------------
// parser, accessors, iterators

TEST(gguf_parse_header_and_accessors)
{
    bb b = { 0 };
    gguf_header h;
    char err[128];
    uint64_t need = 7, u;
    int64_t i;
    double f;
    size_t len;
    uint64_t dims[9] = { 2, 3, 4, 5, 6, 7, 8, 9, 10 };
    bb_head(&b, 1, 5);
    kv_u32(&b, "n", 7);
    kv_u32(&b, "n", 9);                        /* duplicate: last wins */
    bb_str(&b, "neg");
    bb_u32(&b, GGUF_VT_I8);
    bb_put(&b, "\xFE", 1);
    kv_str(&b, "s", "hello");
    bb_str(&b, "big");
    bb_u32(&b, GGUF_VT_U64);
    bb_u64(&b, UINT64_MAX);
    tensor(&b, "t9", 9, dims, 0, 0);
    CHECK_INT(gguf_parse(b.p, b.len, &h, &need, err, sizeof err), GGUF_OK);
    CHECK_INT(h.version, 3);
    CHECK_INT(h.n_kv, 5);
    CHECK(gguf_kv_u64(gguf_kv_find(&h, "n"), &u) && u == 9);
    CHECK(gguf_kv_i64(gguf_kv_find(&h, "neg"), &i) && i == -2);
    CHECK(!gguf_kv_u64(gguf_kv_find(&h, "neg"), &u));
    CHECK(gguf_kv_f64(gguf_kv_find(&h, "neg"), &f) && f == -2.0);
    CHECK(gguf_kv_u64(gguf_kv_find(&h, "big"), &u) && u == UINT64_MAX);
    CHECK(!gguf_kv_i64(gguf_kv_find(&h, "big"), &i));
    CHECK_STR(gguf_kv_str(gguf_kv_find(&h, "s"), &len), "hello");
    CHECK_INT(len, 5);
    CHECK(gguf_kv_str(gguf_kv_find(&h, "n"), NULL) == NULL);
    CHECK(gguf_kv_find(&h, "missing") == NULL);
    CHECK(!gguf_kv_u64(NULL, &u));
    /* nine dimensions: eight kept, all nine multiplied, tensor_span refuses */
    CHECK_INT(h.n_tensors, 1);
    CHECK_INT(h.tensors[0].n_dims, 9);
    CHECK_U64(h.tensors[0].dims[7], 9);
    CHECK_U64((uint64_t)h.tensors[0].nelem, 3628800);
    CHECK(gguf_tensor_find(&h, "t9") == &h.tensors[0]);
    CHECK(gguf_tensor_find(&h, "t") == NULL);
    CHECK_INT(gguf_tensor_span(&h, &h.tensors[0], &u, &u, err, sizeof err), -1);
    CHECK_STR(err, "t9: 9 dimensions; ggml allows at most 4");
    CHECK_U64(h.alignment, 32);
    CHECK_U64(h.data_start, (b.len + 31) / 32 * 32);
    gguf_header_free(&h);
    CHECK(h.kv == NULL && h.n_kv == 0);
    /* status codes for the other outcomes */
    CHECK_INT(gguf_parse(b.p, 10, &h, &need, err, sizeof err), GGUF_NEED_MORE);
    CHECK_U64(need, 16);
    CHECK_INT(gguf_parse((const uint8_t *)"GGUFXXXX", 4, &h, NULL, err, sizeof err), GGUF_NEED_MORE);
    CHECK_INT(gguf_parse((const uint8_t *)"XGUF", 4, &h, &need, err, sizeof err), GGUF_MALFORMED);
    CHECK_STR(err, "not a GGUF file");
    free(b.p);
}

TEST(gguf_array_iterator_bounds)
{
    bb b = { 0 };
    gguf_header h;
    gguf_arr_iter it;
    char err[128];
    const uint8_t *s;
    uint64_t len;
    int64_t iv;
    double dv;
    bb_head(&b, 0, 4);
    bb_str(&b, "strs");
    bb_u32(&b, GGUF_VT_ARRAY);
    bb_u32(&b, GGUF_VT_STRING);
    bb_u64(&b, 2);
    bb_str(&b, "ab");
    bb_strn(&b, "\xFF\0", 2);
    bb_str(&b, "ints");
    bb_u32(&b, GGUF_VT_ARRAY);
    bb_u32(&b, GGUF_VT_I16);
    bb_u64(&b, 2);
    bb_put(&b, "\xFF\xFF\x05\x00", 4);
    bb_str(&b, "u64s");
    bb_u32(&b, GGUF_VT_ARRAY);
    bb_u32(&b, GGUF_VT_U64);
    bb_u64(&b, 1);
    bb_u64(&b, UINT64_MAX);
    bb_str(&b, "f32s");
    bb_u32(&b, GGUF_VT_ARRAY);
    bb_u32(&b, GGUF_VT_F32);
    bb_u64(&b, 1);
    bb_u32(&b, 0xC2FC0000);                    /* -126.0 */
    CHECK_INT(gguf_parse(b.p, b.len, &h, NULL, err, sizeof err), GGUF_OK);

    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&h, "strs"), b.p, b.len, err, sizeof err), 0);
    CHECK_U64(it.left, 2);
    CHECK_INT(gguf_arr_next_str(&it, &s, &len, err, sizeof err), 1);
    CHECK(len == 2 && memcmp(s, "ab", 2) == 0);
    CHECK_INT(gguf_arr_next_str(&it, &s, &len, err, sizeof err), 1);
    CHECK(len == 2 && memcmp(s, "\xFF\0", 2) == 0);   /* raw bytes, not repaired */
    CHECK_INT(gguf_arr_next_str(&it, &s, &len, err, sizeof err), 0);
    /* wrong kinds */
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&h, "strs"), b.p, b.len, err, sizeof err), 0);
    CHECK_INT(gguf_arr_next_i64(&it, &iv, err, sizeof err), -1);
    CHECK_STR(err, "array elements are of value type 8, not integers");
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&h, "ints"), b.p, b.len, err, sizeof err), 0);
    CHECK_INT(gguf_arr_next_str(&it, &s, &len, err, sizeof err), -1);
    CHECK_INT(gguf_arr_next_i64(&it, &iv, err, sizeof err), 1);
    CHECK_INT(iv, -1);
    CHECK_INT(gguf_arr_next_f64(&it, &dv, err, sizeof err), 1);
    CHECK(dv == 5.0);
    CHECK_INT(gguf_arr_next_i64(&it, &iv, err, sizeof err), 0);
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&h, "u64s"), b.p, b.len, err, sizeof err), 0);
    CHECK_INT(gguf_arr_next_i64(&it, &iv, err, sizeof err), -1);
    CHECK_STR(err, "array element 18446744073709551615 does not fit a 64-bit signed integer");
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&h, "f32s"), b.p, b.len, err, sizeof err), 0);
    CHECK_INT(gguf_arr_next_i64(&it, &iv, err, sizeof err), -1);
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&h, "f32s"), b.p, b.len, err, sizeof err), 0);
    CHECK_INT(gguf_arr_next_f64(&it, &dv, err, sizeof err), 1);
    CHECK(dv == -126.0);
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&h, "nope"), b.p, b.len, err, sizeof err), -1);
    CHECK_STR(err, "(missing key) is not an array");
    /* a buffer cut inside the second string: the first reads, then an error */
    {
        const gguf_kv *kv = gguf_kv_find(&h, "strs");
        size_t cut = (size_t)kv->off + 12 + 10 + 9;
        CHECK_INT(gguf_arr_begin(&it, kv, b.p, cut, err, sizeof err), 0);
        CHECK_INT(gguf_arr_next_str(&it, &s, &len, err, sizeof err), 1);
        CHECK_INT(gguf_arr_next_str(&it, &s, &len, err, sizeof err), -1);
        CHECK_STR(err, "array element at byte 62 runs past the end of the data");
        CHECK_INT(gguf_arr_next_str(&it, &s, &len, err, sizeof err), 0);   /* stays stopped */
    }
    gguf_header_free(&h);
    free(b.p);
}

// ---------------------------------------------------------------------------
// type table, spans

TEST(gguf_type_table)
{
    static const struct { uint32_t id; const char *name; } names[] = {
        { 0, "F32" }, { 1, "F16" }, { 2, "Q4_0" }, { 3, "Q4_1" }, { 4, "4" }, { 5, "5" },
        { 6, "Q5_0" }, { 7, "Q5_1" }, { 8, "Q8_0" }, { 9, "Q8_1" }, { 10, "Q2_K" }, { 11, "Q3_K" },
        { 12, "Q4_K" }, { 13, "Q5_K" }, { 14, "Q6_K" }, { 15, "Q8_K" }, { 16, "IQ2_XXS" },
        { 17, "IQ2_XS" }, { 18, "IQ3_XXS" }, { 19, "IQ1_S" }, { 20, "IQ4_NL" }, { 21, "IQ3_S" },
        { 22, "IQ2_S" }, { 23, "IQ4_XS" }, { 24, "I8" }, { 25, "I16" }, { 26, "I32" },
        { 27, "I64" }, { 28, "F64" }, { 29, "IQ1_M" }, { 30, "BF16" }, { 31, "31" }, { 33, "33" },
        { 34, "TQ1_0" }, { 35, "TQ2_0" }, { 36, "36" }, { 38, "38" }, { 39, "MXFP4" },
        { 40, "NVFP4" }, { 41, "Q1_0" }, { 42, "Q2_0" }, { 43, "43" }, { 141, "141" },
        { 142, "PQ2_0" }, { 143, "PTQ1_0" }, { 144, "144" }, { UINT32_MAX, "4294967295" },
    };
    static const struct { uint32_t id; uint64_t e, b; } layouts[] = {
        { 0, 1, 4 }, { 1, 1, 2 }, { 30, 1, 2 }, { 8, 32, 34 }, { 41, 128, 18 }, { 42, 64, 18 },
        { 12, 256, 144 }, { 14, 256, 210 }, { 2, 32, 18 }, { 3, 32, 20 }, { 6, 32, 22 },
        { 7, 32, 24 }, { 9, 32, 36 }, { 13, 256, 176 }, { 15, 256, 292 }, { 10, 256, 84 },
        { 11, 256, 110 }, { 20, 32, 18 }, { 23, 256, 136 },
        { 34, 256, 54 }, { 35, 256, 66 }, { 18, 256, 98 }, { 21, 256, 110 },
        { 16, 256, 66 }, { 17, 256, 74 }, { 22, 256, 82 }, { 19, 256, 50 }, { 29, 256, 56 },
    };
    char buf[16];
    uint64_t e = 99, b = 99;
    int readable = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK_STR(gguf_type_name(names[i].id, buf), names[i].name);
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        CHECK_INT(gguf_block_layout(layouts[i].id, &e, &b), 1);
        CHECK_U64(e, layouts[i].e);
        CHECK_U64(b, layouts[i].b);
    }
    for (uint32_t id = 0; id < 300; id++) readable += gguf_block_layout(id, &e, &b);
    CHECK_INT(readable, 28);
    e = b = 7;
    CHECK_INT(gguf_block_layout(39, &e, &b), 0);   /* MXFP4: no kernel, not readable yet */
    CHECK(e == 7 && b == 7);
    CHECK(gguf_type_info_of(143) != NULL && gguf_type_info_of(144) == NULL);
    CHECK(gguf_type_info_of(4) != NULL && gguf_type_info_of(4)->name == NULL);
    CHECK_STR(gguf_verdict_str(GGUF_VERDICT_NEED_MORE), "need_more");
    CHECK_INT(gguf_verdict_exit(GGUF_VERDICT_REFUSE), 2);
    CHECK_INT(gguf_verdict_exit(GGUF_VERDICT_NEED_MORE), 3);
    CHECK_INT(gguf_verdict_exit(GGUF_VERDICT_PLAY), 0);
}

static gguf_tensor mk_tensor(uint32_t nd, uint64_t d0, uint64_t d1, uint32_t type, uint64_t off)
{
    gguf_tensor t;
    memset(&t, 0, sizeof t);
    t.name = "t";
    t.name_len = 1;
    t.n_dims = nd;
    t.dims[0] = d0;
    t.dims[1] = d1;
    t.type = type;
    t.offset = off;
    t.nelem = 1;
    for (uint32_t i = 0; i < nd && i < 2; i++) {
        if (__builtin_mul_overflow(t.nelem, (unsigned __int128)t.dims[i], &t.nelem))
            t.nelem = ~(unsigned __int128)0;
    }
    return t;
}

TEST(gguf_tensor_span_is_checked)
{
    gguf_header h;
    gguf_tensor t;
    uint64_t off = 0, len = 0;
    char err[128];
    memset(&h, 0, sizeof h);
    h.data_start = 64;
    h.alignment = 32;
    t = mk_tensor(2, 128, 2, 41, 0);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), 0);
    CHECK(off == 64 && len == 36);
    t = mk_tensor(2, 64, 3, 42, 32);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), 0);
    CHECK(off == 96 && len == 54);
    t = mk_tensor(2, 512, 2, 12, 0);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), 0);
    CHECK_U64(len, 4 * 144);
    t = mk_tensor(1, 256, 0, 14, 0);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), 0);
    CHECK_U64(len, 210);
    t = mk_tensor(0, 0, 0, 0, 8);                   /* a scalar: one element */
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), 0);
    CHECK(off == 72 && len == 4);
    t = mk_tensor(2, 100, 2, 41, 0);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), -1);
    CHECK_STR(err, "t: row length 100 is not a whole number of 128-element blocks");
    t = mk_tensor(0, 0, 0, 8, 0);                   /* one element is not a Q8_0 block */
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), -1);
    CHECK_STR(err, "t: row length 1 is not a whole number of 32-element blocks");
    /* 0.0.1 of the Rust truncated this count to 64 bits */
    t = mk_tensor(2, (uint64_t)1 << 62, (uint64_t)1 << 40, 42, 0);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), -1);
    CHECK_STR(err, "t: size or offset overflows");
    t = mk_tensor(1, 64, 0, 42, UINT64_MAX);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), -1);
    CHECK_STR(err, "t: size or offset overflows");
    t = mk_tensor(1, (uint64_t)1 << 62, 0, 0, 0);   /* 2^64 bytes of F32 */
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), -1);
    CHECK_STR(err, "t: size or offset overflows");
    t = mk_tensor(1, 256, 0, 39, 0);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), -1);
    CHECK_STR(err, "t: type MXFP4 not readable");
    t = mk_tensor(1, 64, 0, 77, 0);
    CHECK_INT(gguf_tensor_span(&h, &t, &off, &len, err, sizeof err), -1);
    CHECK_STR(err, "t: type 77 not readable");
}

// ---------------------------------------------------------------------------
// real files, guard_file, the map

TEST(gguf_real_stories260k)
{
    const char *p = test_shared("models/stories260K.gguf");
    gguf_report r;
    gguf_map m;
    gguf_arr_iter it;
    char err[256];
    jbuf j;
    const uint8_t *s, *w;
    uint64_t len, n = 0;
    double dv;
    int64_t iv;
    if (!p) SKIP("../shared/models/stories260K.gguf is absent");
    CHECK_INT(gguf_guard_file(p, GGUF_ENGINE_MAINLINE, &r, err, sizeof err), 0);
    jbuf_init(&j);
    /* gguf_guard.py --json printed the same object (compared parsed) */
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 3, \"arch\": \"llama\", \"name\": \"llama\", \"tensors\": 48, "
              "\"types\": {\"F32\": 48}, \"engine\": \"mainline\", \"reasons\": [], "
              "\"kv_f16_bytes_per_token\": 640, \"verdict\": \"play\"}");
    CHECK_STR(text_of(&r, &j), "play F32:48\n");
    CHECK_U64(r.header.data_start, 14176);
    CHECK_INT(gguf_map_open(p, &m, err, sizeof err), 0);
    CHECK_U64(m.len, 1185376);
    CHECK_INT(gguf_map_unchanged(&m, p), 1);
    /* the vocabulary, decoded lazily from the map */
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&r.header, "tokenizer.ggml.tokens"), m.p, m.len,
                             err, sizeof err), 0);
    CHECK_U64(it.left, 512);
    for (;;) {
        int rc = gguf_arr_next_str(&it, &s, &len, err, sizeof err);
        if (rc != 1) { CHECK_INT(rc, 0); break; }
        if (n == 0) CHECK(len == 5 && memcmp(s, "<unk>", 5) == 0);
        if (n == 1) CHECK(len == 3 && memcmp(s, "<s>", 3) == 0);
        if (n == 2) CHECK(len == 4 && memcmp(s, "</s>", 4) == 0);
        if (n == 300) CHECK(len == 5 && memcmp(s, "\xE2\x96\x81ha", 5) == 0);
        if (n == 511) CHECK(len == 3 && memcmp(s, "\xE2\x80\x8A", 3) == 0);
        n++;
    }
    CHECK_U64(n, 512);
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&r.header, "tokenizer.ggml.scores"), m.p, m.len,
                             err, sizeof err), 0);
    for (n = 0; n <= 300 && gguf_arr_next_f64(&it, &dv, err, sizeof err) == 1; n++) {}
    CHECK(dv == -41.0);
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&r.header, "tokenizer.ggml.token_type"), m.p,
                             m.len, err, sizeof err), 0);
    CHECK_INT(gguf_arr_next_i64(&it, &iv, err, sizeof err), 1);
    CHECK_INT(iv, 2);
    CHECK_INT(gguf_arr_next_i64(&it, &iv, err, sizeof err), 1);
    CHECK_INT(iv, 3);
    /* a prefix that stops inside the vocabulary: an error, not a read past it */
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&r.header, "tokenizer.ggml.tokens"), m.p, 1000,
                             err, sizeof err), 0);
    for (n = 0; gguf_arr_next_str(&it, &s, &len, err, sizeof err) == 1; n++) {}
    CHECK(n > 3 && n < 512);
    CHECK(strstr(err, "runs past the end of the data") != NULL);
    /* the first weights of token_embd.weight, as gguf-py reads them */
    {
        const gguf_tensor *t = gguf_tensor_find(&r.header, "token_embd.weight");
        uint64_t off = 0;
        uint32_t bits[3];
        CHECK(t != NULL);
        if (t) {
            CHECK_INT(gguf_tensor_span(&r.header, t, &off, &len, err, sizeof err), 0);
            CHECK(off == 14176 && len == 131072);
            w = gguf_map_tensor(&m, &r.header, t, err, sizeof err);
            CHECK(w == m.p + 14176);
            if (w) {
                memcpy(bits, w, sizeof bits);
                CHECK_U64(bits[0], 3197561168u);
                CHECK_U64(bits[1], 1058003044u);
                CHECK_U64(bits[2], 1043571191u);
            }
            /* a lying copy of it: past the end, then overflowing */
            gguf_tensor lie = *t;
            lie.offset = m.len - r.header.data_start - len + 1;
            CHECK(gguf_map_tensor(&m, &r.header, &lie, err, sizeof err) == NULL);
            CHECK_STR(err, "token_embd.weight: runs past the end of the file");
            lie.offset = m.len - r.header.data_start - len;   /* ends exactly at the end */
            CHECK(gguf_map_tensor(&m, &r.header, &lie, err, sizeof err) == m.p + m.len - len);
            lie.offset = UINT64_MAX - 100;
            CHECK(gguf_map_tensor(&m, &r.header, &lie, err, sizeof err) == NULL);
            CHECK_STR(err, "token_embd.weight: size or offset overflows");
        }
    }
    /* every tensor of the real file maps */
    for (size_t i = 0; i < r.header.n_tensors; i++)
        CHECK(gguf_map_tensor(&m, &r.header, &r.header.tensors[i], err, sizeof err) != NULL);
    gguf_map_close(&m);
    CHECK(m.p == NULL);
    gguf_map_close(&m);
    jbuf_free(&j);
    gguf_report_free(&r);
}

TEST(gguf_real_llama2_tiny_random)
{
    const char *p = test_shared("models/llama-2-tiny-random.gguf");
    gguf_report r;
    gguf_map m;
    gguf_arr_iter it;
    char err[256];
    jbuf j;
    const uint8_t *s;
    uint64_t len, n;
    if (!p) SKIP("../shared/models/llama-2-tiny-random.gguf is absent");
    CHECK_INT(gguf_guard_file(p, GGUF_ENGINE_PRISM, &r, err, sizeof err), 0);
    jbuf_init(&j);
    CHECK_STR(json_of(&r, &j),
              "{\"gguf_version\": 3, \"arch\": \"llama\", \"name\": \"LLaMA v2\", \"tensors\": 12, "
              "\"types\": {\"F32\": 3, \"F16\": 9}, \"engine\": \"prism\", \"reasons\": [], "
              "\"kv_f16_bytes_per_token\": 32, \"verdict\": \"play\"}");
    CHECK_STR(text_of(&r, &j), "play F32:3 F16:9\n");
    CHECK_U64(r.header.data_start, 724416);
    CHECK_INT(gguf_map_open(p, &m, err, sizeof err), 0);
    CHECK_INT(gguf_arr_begin(&it, gguf_kv_find(&r.header, "tokenizer.ggml.tokens"), m.p, m.len,
                             err, sizeof err), 0);
    CHECK_U64(it.left, 32000);
    for (n = 0; gguf_arr_next_str(&it, &s, &len, err, sizeof err) == 1; n++)
        if (n == 31999) CHECK(len == 3 && memcmp(s, "\xE7\xBB\x99", 3) == 0);
    CHECK_U64(n, 32000);
    for (size_t i = 0; i < r.header.n_tensors; i++)
        CHECK(gguf_map_tensor(&m, &r.header, &r.header.tensors[i], err, sizeof err) != NULL);
    CHECK(gguf_map_tensor(&m, &r.header, gguf_tensor_find(&r.header, "output.weight"), err,
                          sizeof err) == m.p + 1238560);
    gguf_map_close(&m);
    jbuf_free(&j);
    gguf_report_free(&r);
}

static char *write_temp(const void *p, size_t n)
{
    static char path[64];
    int fd;
    strcpy(path, "/tmp/test_gguf_XXXXXX");
    fd = mkstemp(path);
    if (fd < 0) return NULL;
    if (n && write(fd, p, n) != (ssize_t)n) { close(fd); unlink(path); return NULL; }
    close(fd);
    return path;
}

TEST(gguf_guard_file_truncated_and_unreadable)
{
    const char *p = test_shared("models/stories260K.gguf");
    size_t n;
    char *data, *tmp, err[256];
    gguf_report r;
    gguf_map m;
    if (!p) SKIP("../shared/models/stories260K.gguf is absent");
    data = test_read_file(p, &n);
    CHECK(data != NULL);
    if (!data) return;
    /* a truncated file: need_more survives (the Python said 1001) */
    tmp = write_temp(data, 1000);
    CHECK(tmp != NULL);
    if (tmp) {
        CHECK_INT(gguf_guard_file(tmp, GGUF_ENGINE_MAINLINE, &r, err, sizeof err), 0);
        CHECK_INT(r.verdict, GGUF_VERDICT_NEED_MORE);
        CHECK_U64(r.bytes_needed, 1001);
        gguf_report_free(&r);
        unlink(tmp);
    }
    free(data);
    tmp = write_temp("", 0);
    CHECK(tmp != NULL);
    if (tmp) {
        CHECK_INT(gguf_guard_file(tmp, GGUF_ENGINE_MAINLINE, &r, err, sizeof err), 0);
        CHECK_INT(r.verdict, GGUF_VERDICT_NEED_MORE);
        CHECK_U64(r.bytes_needed, 4);
        gguf_report_free(&r);
        CHECK_INT(gguf_map_open(tmp, &m, err, sizeof err), -1);
        CHECK(strstr(err, " is empty") != NULL);
        unlink(tmp);
    }
    CHECK_INT(gguf_guard_file("/nonexistent/x.gguf", GGUF_ENGINE_MAINLINE, &r, err, sizeof err), -1);
    CHECK_STR(err, "No such file or directory (os error 2)");
    CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
    CHECK_INT(gguf_guard_file("/tmp", GGUF_ENGINE_MAINLINE, &r, err, sizeof err), -1);
    CHECK_STR(err, "Is a directory (os error 21)");
    CHECK_INT(gguf_map_open("/nonexistent/x.gguf", &m, err, sizeof err), -1);
    CHECK_STR(err, "cannot open /nonexistent/x.gguf: No such file or directory");
    CHECK_INT(gguf_map_open("/tmp", &m, err, sizeof err), -1);
    CHECK_STR(err, "/tmp is not a regular file");
}

/* A header bigger than the 32 MiB first read: guard_file reads on. The
 * file name carries the Bonsai 2 label, so the base name must reach it. */
TEST(gguf_guard_file_rereads_past_32_mib)
{
    bb b = { 0 };
    uint64_t big = ((uint64_t)33 << 20), d = 4;
    char *tmp, path[96], err[256];
    gguf_report r;
    bb_head(&b, 1, 1);
    bb_str(&b, "big");
    bb_u32(&b, GGUF_VT_ARRAY);
    bb_u32(&b, GGUF_VT_U8);
    bb_u64(&b, big);
    bb_zeros(&b, (size_t)big);
    tensor(&b, "w", 1, &d, 0, 0);
    bb_pad(&b, 32);
    bb_zeros(&b, 16);
    tmp = write_temp(b.p, b.len);
    CHECK(tmp != NULL);
    if (tmp) {
        snprintf(path, sizeof path, "%s-bonsai-2.gguf", tmp);
        CHECK_INT(rename(tmp, path), 0);
        CHECK_INT(gguf_guard_file(path, GGUF_ENGINE_PRISM, &r, err, sizeof err), 0);
        CHECK_INT(r.verdict, GGUF_VERDICT_PLAY);
        CHECK_U64(r.tensors, 1);
        gguf_report_free(&r);
        CHECK_INT(gguf_guard_file(path, GGUF_ENGINE_MAINLINE, &r, err, sizeof err), 0);
        CHECK_INT(r.verdict, GGUF_VERDICT_REFUSE);
        CHECK_INT(r.n_reasons, 1);
        gguf_report_free(&r);
        /* the pure judge over the first 32 MiB asks for more */
        CHECK_INT(gguf_judge(b.p, (size_t)GGUF_GUARD_PREFIX, GGUF_ENGINE_PRISM, -1, "", &r), 0);
        CHECK_INT(r.verdict, GGUF_VERDICT_NEED_MORE);
        CHECK_U64(r.bytes_needed, 24 + 11 + 4 + 12 + big);
        gguf_report_free(&r);
        unlink(path);
    }
    free(b.p);
}

/* gguf_ftype_name: general.file_type when it is a u32, else the guess. The
 * guess walks the tensors as llama_model_loader's weights_map orders them
 * (by "blk.N." layer, names without one first, then by name) and keeps the
 * first type to reach the highest count. */
static const char *ftype_of(const tdesc *ts, size_t nt, int file_type)
{
    static char out[64];
    bb b = { 0 };
    uint64_t off = 0;
    bb_head(&b, nt, file_type >= 0 ? 2 : 1);
    kv_str(&b, "general.architecture", "llama");
    if (file_type >= 0) kv_u32(&b, "general.file_type", (uint32_t)file_type);
    for (size_t i = 0; i < nt; i++) {
        tensor(&b, ts[i].name, 1, &ts[i].n, ts[i].type, off);
        off += 64;
    }
    gguf_header h;
    snprintf(out, sizeof out, "%s", "(parse failed)");
    if (gguf_parse(b.p, b.len, &h, NULL, NULL, 0) == GGUF_OK) {
        snprintf(out, sizeof out, "%s", gguf_ftype_name(&h));
        gguf_header_free(&h);
    }
    free(b.p);
    return out;
}

TEST(gguf_ftype_name_as_llama_cpp)
{
    /* two Q8_0 and two F32: the tie goes to the type that got there first in the loader's order, and
     * "output_norm" (no layer) comes before every blk.N. tensor */
    const tdesc tie[] = {{"blk.0.attn_q.weight", 32, 8}, {"blk.0.attn_norm.weight", 32, 0},
                         {"output_norm.weight", 32, 0}, {"blk.1.attn_q.weight", 32, 8}};
    CHECK_STR(ftype_of(tie, 4, -1), "(guessed) all F32");
    const tdesc tie2[] = {{"blk.0.attn_q.weight", 32, 8}, {"blk.0.attn_norm.weight", 32, 0},
                          {"blk.10.x.weight", 32, 0}, {"blk.2.attn_q.weight", 32, 8}};
    CHECK_STR(ftype_of(tie2, 4, -1), "(guessed) Q8_0");   /* blk.2 sorts before blk.10 by layer, not by name */
    const tdesc k4[] = {{"a.weight", 256, 12}, {"b.weight", 256, 12}, {"c.weight", 256, 14}};
    CHECK_STR(ftype_of(k4, 3, -1), "(guessed) Q4_K - Medium");
    const tdesc mx[] = {{"a.weight", 32, 39}};
    CHECK_STR(ftype_of(mx, 1, -1), "(guessed) all F32");  /* a type the loader has no file type for */
    CHECK_STR(ftype_of(k4, 3, 15), "Q4_K - Medium");      /* the file says */
    CHECK_STR(ftype_of(k4, 3, 18), "Q6_K");
    CHECK_STR(ftype_of(k4, 3, 1024 | 7), "(guessed) Q8_0");
    CHECK_STR(ftype_of(k4, 3, 4), "unknown, may not work");   /* 4: removed from llama.h */
    CHECK_STR(ftype_of(NULL, 0, -1), "(guessed) all F32");
}

/* The map of a file that shrinks, or is written in place, under it (issue
 * #22.5): a read past the new end is caught (zeros, gguf_map_faulted), not
 * a SIGBUS that kills; an in-place write with its mtime put back is seen
 * through ctime. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

TEST(gguf_map_shrunk_or_edited_under_it)
{
    char path[] = "/tmp/bankml-map-XXXXXX", err[256];
    int fd = mkstemp(path);
    static unsigned char buf[3 * 65536];
    gguf_map m;
    CHECK(fd >= 0);
    if (fd < 0) return;
    memset(buf, 0xAB, sizeof buf);
    CHECK(write(fd, buf, sizeof buf) == (ssize_t)sizeof buf);
    close(fd);
    CHECK_INT(gguf_map_open(path, &m, err, sizeof err), 0);
    CHECK_INT(gguf_map_unchanged(&m, path), 1);
    CHECK_INT(gguf_map_intact(&m), 1);
    CHECK_INT(gguf_map_faulted(&m), 0);
    CHECK_INT(m.p[sizeof buf - 1], 0xAB);
    CHECK_INT(truncate(path, 4096), 0);
    CHECK_INT(gguf_map_intact(&m), 0);                 /* the size moved */
    volatile const unsigned char *v = m.p;
    CHECK_INT(v[100], 0xAB);                           /* still inside the file */
    CHECK_INT(v[2 * 65536 + 5], 0);                    /* past its end: caught, zeros */
    CHECK_INT(gguf_map_faulted(&m), 1);
    CHECK_INT(v[sizeof buf - 1], 0);
    gguf_map_close(&m);
    /* an in-place write with the mtime put back: ctime tells */
    CHECK_INT(gguf_map_open(path, &m, err, sizeof err), 0);
    CHECK_INT(gguf_map_faulted(&m), 0);                /* a new map starts clean */
    struct stat st;
    CHECK_INT(stat(path, &st), 0);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);                              /* a later ctime than the map's, on any clock */
    fd = open(path, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, "\x01", 1, 10) == 1);
    if (fd >= 0) close(fd);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    CHECK_INT(utimensat(AT_FDCWD, path, times, 0), 0);   /* touch -r: the mtime as it was */
    CHECK_INT(stat(path, &st), 0);
    CHECK(st.st_mtim.tv_sec == m.mtime_sec && st.st_mtim.tv_nsec == m.mtime_nsec);
    CHECK_INT(gguf_map_intact(&m), 0);
    CHECK_INT(gguf_map_unchanged(&m, path), 0);
    gguf_map_close(&m);
    gguf_map_close(&m);
    unlink(path);
}
