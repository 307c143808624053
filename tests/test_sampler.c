/*
 * test_sampler.c -- unit tests of src/sampling/sampler.c. Expected values come from libstdc++ (GCC's
 * std::mt19937, uniform_real_distribution, std::sort, std::partial_sort run on the same inputs) and
 * from llama-server b11669's answers (the refusal messages, recorded by testing/oracle_sampler.py,
 * which also compares the whole chain with libllama's).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "file/gguf.h"
#include "sampling/sampler.h"
#include "test.h"

static json_value *J(const char *s) {
    char err[200];
    json_value *v = json_parse(s, strlen(s), err, sizeof err);
    if (!v) fprintf(stderr, "bad test JSON: %s\n", err);
    return v;
}

/* sampler_resolve of a request over llama-server's defaults: the message, or "" */
static const char *resolve_msg(const char *req, char *err, size_t n) {
    sampler_params d, p;
    sampler_params_init(&d);
    json_value *r = J(req);
    err[0] = 0;
    sampler_resolve(&p, &d, r, err, n);
    json_free(r);
    sampler_params_free(&p);
    sampler_params_free(&d);
    return err;
}

TEST(sampler_mt19937_matches_std) {
    smp_mt19937 g;
    smp_mt_seed(&g, 5489);
    CHECK_U64(smp_mt_next(&g), 3499211612u);
    uint32_t v = 0;
    for (int i = 1; i < 10000; i++) v = smp_mt_next(&g);
    CHECK_U64(v, 4123659995u);
}

TEST(sampler_uniform_draws_match_libstdcxx) {
    smp_mt19937 g;
    smp_mt_seed(&g, 42);
    double d1 = smp_uniform_double(&g), d2 = smp_uniform_double(&g);
    CHECK(d1 == 0x1.97d47b66bfc3cp-1);
    CHECK(d2 == 0x1.77aca8779b102p-3);
    smp_mt_seed(&g, 42);
    float f1 = smp_uniform_float(&g), f2 = smp_uniform_float(&g);
    CHECK(f1 == 0x1.7f8772p-2f);
    CHECK(f2 == 0x1.97d47cp-1f);
}

/* 40 candidates whose logits are 0, 1, 2 in turn: the tie order std::sort and std::partial_sort
 * (g++ 12 libstdc++) leave */
TEST(sampler_sort_tie_orders) {
    smp_token a[40];
    for (int i = 0; i < 40; i++) a[i] = (smp_token){i, (float)((i * 7) % 3), 0};
    smp_token b[40];
    memcpy(b, a, sizeof a);
    smp_sort_by_logit(b, 40);
    static const int want_sort[40] = {29, 20, 17, 23, 14, 26, 11, 8, 32, 5, 35, 2, 38, 31, 1, 34, 28, 25, 37, 22,
                                      16, 13, 4, 10, 19, 7, 30, 39, 0, 3, 36, 6, 33, 9, 12, 27, 15, 24, 18, 21};
    for (int i = 0; i < 40; i++) CHECK_INT(b[i].id, want_sort[i]);
    memcpy(b, a, sizeof a);
    smp_partial_sort_by_logit(b, 10, 40);
    static const int want_psort[10] = {8, 17, 20, 11, 5, 23, 26, 29, 14, 2};
    for (int i = 0; i < 10; i++) CHECK_INT(b[i].id, want_psort[i]);
}

/* every refusal llama-server b11669 answers with 400 for a sampling field (messages recorded from
 * it on stories260K), and bankml's own */
TEST(sampler_refusals_match_llama_server) {
    static const char *cases[][2] = {
        {"{\"top_k\": \"x\"}", "Field 'top_k': [json.exception.type_error.302] type must be number, but is string"},
        {"{\"min_p\": [1]}", "Field 'min_p': [json.exception.type_error.302] type must be number, but is array"},
        {"{\"top_n_sigma\": {}}", "Field 'top_n_sigma': [json.exception.type_error.302] type must be number, but is object"},
        {"{\"repeat_last_n\": -1}", "Field 'repeat_last_n': Value must be between 0 <= value <= 2147483647, but got -1"},
        {"{\"repeat_last_n\": -2.5}", "Field 'repeat_last_n': Value must be between 0 <= value <= 2147483647, but got -2"},
        {"{\"dry_allowed_length\": -1}", "Field 'dry_allowed_length': Value must be between 0 <= value <= 2147483647, but got -1"},
        {"{\"dry_penalty_last_n\": -1}", "Field 'dry_penalty_last_n': Value must be between 0 <= value <= 2147483647, but got -1"},
        {"{\"min_keep\": -1}", "Field 'min_keep': Value must be between 0 <= value <= 2147483647, but got -1"},
        {"{\"min_keep\": 1e10}", "Field 'min_keep': Value must be between 0 <= value <= 2147483647, but got -2147483648"},
        {"{\"repeat_penalty\": 0}", "Failed to initialize samplers: penalty_repeat must be finite and greater than 0"},
        {"{\"repeat_penalty\": -1}", "Failed to initialize samplers: penalty_repeat must be finite and greater than 0"},
        {"{\"repeat_penalty\": 1e-39}", "Failed to initialize samplers: penalty_repeat must be finite and greater than 0"},
        {"{\"dry_sequence_breakers\": []}", "Field 'dry_sequence_breakers': Error: dry_sequence_breakers must be a non-empty array of strings"},
        {"{\"dry_sequence_breakers\": [\"a\", 2]}", "Field 'dry_sequence_breakers': Error: dry_sequence_breakers must be a non-empty array of strings"},
        {"{\"seed\": \"a\"}", "Field 'seed': [json.exception.type_error.302] type must be number, but is string"},
        {"{\"dry_base\": \"a\"}", "Field 'dry_base': [json.exception.type_error.302] type must be number, but is string"},
        {"{\"logprobs\": \"3\"}", "Field 'logprobs': [json.exception.type_error.302] type must be number, but is string"},
        {"{\"adaptive_decay\": 1.0}", "Field 'adaptive_decay': Value must be between 0.000000 <= value <= 0.990000, but got 1.000000"},
        {"{\"post_sampling_probs\": 1}", "Field 'post_sampling_probs': [json.exception.type_error.302] type must be boolean, but is number"},
        {"{\"samplers\": [\"top_k\", 3]}", "Field 'samplers': [json.exception.type_error.302] type must be string, but is number"},
        {"{\"typical_p\": true, \"dry_multiplier\": \"x\"}", "Field 'dry_multiplier': [json.exception.type_error.302] type must be number, but is string"},
        {"{\"mirostat\": 1}", "mirostat: not reproduced; bankML reproduces llama-server's default sampler chain"},
        {"{\"samplers\": \"kt\"}", "samplers: a custom sampler order is not reproduced; bankML runs llama-server's default "
                                   "order (penalties, dry, top-n-σ, top-k, typical-p, top-p, min-p, xtc, temperature)"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) CHECK_STR(resolve_msg(cases[i][0], err, sizeof err), cases[i][1]);
    /* accepted: the default order spelled out, mirostat clamped to 0 */
    CHECK_STR(resolve_msg("{\"samplers\": \"edskypmxt\", \"mirostat\": -4}", err, sizeof err), "");
    CHECK_STR(resolve_msg("{\"samplers\": [\"penalties\", \"DRY\", \"top-n-sigma\", \"topk\", \"typ\", \"nucleus\", "
                          "\"min_p\", \"xtc\", \"temp\", \"bogus\"]}", err, sizeof err), "");
}

/* clamps and conversions as llama-server's generation_settings shows them */
TEST(sampler_resolve_clamps_like_llama_server) {
    sampler_params d, p;
    sampler_params_init(&d);
    char err[256];
    json_value *r = J("{\"top_k\": 1e12, \"top_p\": true, \"min_p\": -1, \"temperature\": -1, \"seed\": -1.5, "
                      "\"frequency_penalty\": 1e39, \"dry_base\": 0.5, \"n_probs\": -3, \"min_keep\": 3.99, "
                      "\"xtc_probability\": 7, \"typical_p\": null, \"dry_sequence_breakers\": [\"a\", \"bc\"]}");
    CHECK_INT(sampler_resolve(&p, &d, r, err, sizeof err), 0);
    CHECK_INT(p.top_k, 0);
    CHECK(p.top_p == 1.0f);
    CHECK(p.min_p == 0.0f);
    CHECK(p.temp == 0.0f);
    CHECK_U64(p.seed, 4294967295u);
    CHECK(p.penalty_freq == FLT_MAX);
    CHECK(p.dry_base == 1.75f);
    CHECK_INT(p.n_probs, -3);
    CHECK_INT(p.min_keep, 3);
    CHECK(p.xtc_probability == 1.0f);
    CHECK(p.typ_p == 1.0f);
    CHECK_INT((int)p.n_dry_breakers, 2);
    CHECK_STR(p.dry_breakers[1], "bc");
    json_free(r);
    sampler_params_free(&p);
    r = J("{\"top_k\": 4294967336, \"seed\": 4294967297, \"logprobs\": 4, \"temperature\": 1e39}");
    CHECK_INT(sampler_resolve(&p, &d, r, err, sizeof err), 0);
    CHECK_INT(p.top_k, 40);
    CHECK_U64(p.seed, 1u);
    CHECK_INT(p.n_probs, 4);
    CHECK(isinf(p.temp));
    json_free(r);
    sampler_params_free(&p);
    sampler_params_free(&d);
}

TEST(sampler_oai_logprobs_mapping) {
    int32_t n = 0;
    int set = 0;
    char err[128];
    json_value *r = J("{\"logprobs\": true}");
    CHECK_INT(sampler_oai_logprobs(r, &n, &set, err, sizeof err), 0);
    CHECK_INT(set, 1);
    CHECK_INT(n, 20);
    json_free(r);
    r = J("{\"logprobs\": true, \"top_logprobs\": 3}");
    CHECK_INT(sampler_oai_logprobs(r, &n, &set, err, sizeof err), 0);
    CHECK_INT(n, 3);
    json_free(r);
    r = J("{\"top_logprobs\": 3}");
    CHECK_INT(sampler_oai_logprobs(r, &n, &set, err, sizeof err), -1);
    CHECK_STR(err, "top_logprobs requires logprobs to be set to true");
    json_free(r);
    r = J("{\"logprobs\": 1, \"top_logprobs\": null}");
    CHECK_INT(sampler_oai_logprobs(r, &n, &set, err, sizeof err), 0);
    CHECK_INT(set, 0);
    json_free(r);
}

/* a GGUF header with general.sampling.* keys, read as llama.cpp reads them (through "%f") */
static size_t put_kv_hdr(uint8_t *b, const char *key, uint32_t type) {
    uint64_t n = strlen(key);
    memcpy(b, &n, 8);
    memcpy(b + 8, key, n);
    memcpy(b + 8 + n, &type, 4);
    return 12 + n;
}

TEST(sampler_gguf_defaults_read_like_llama) {
    uint8_t b[1024];
    size_t o = 0;
    memcpy(b, "GGUF", 4);
    uint32_t ver = 3;
    memcpy(b + 4, &ver, 4);
    uint64_t nt = 0, nkv = 4;
    memcpy(b + 8, &nt, 8);
    memcpy(b + 16, &nkv, 8);
    o = 24;
    float temp = 0.1234567f;
    o += put_kv_hdr(b + o, "general.sampling.temp", GGUF_VT_F32);
    memcpy(b + o, &temp, 4);
    o += 4;
    float k = 20.9f;  /* "20.900000" through strtol: 20 */
    o += put_kv_hdr(b + o, "general.sampling.top_k", GGUF_VT_F32);
    memcpy(b + o, &k, 4);
    o += 4;
    int32_t last = -7;
    o += put_kv_hdr(b + o, "general.sampling.penalty_last_n", GGUF_VT_I32);
    memcpy(b + o, &last, 4);
    o += 4;
    const char *seq = "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature";
    o += put_kv_hdr(b + o, "general.sampling.sequence", GGUF_VT_STRING);
    uint64_t sl = strlen(seq);
    memcpy(b + o, &sl, 8);
    memcpy(b + o + 8, seq, sl);
    o += 8 + sl;
    gguf_header h;
    char err[200];
    CHECK_INT(gguf_parse(b, o, &h, NULL, err, sizeof err), GGUF_OK);
    sampler_params p;
    sampler_params_init(&p);
    CHECK_INT(sampler_gguf_defaults(&p, &h, err, sizeof err), 0);
    CHECK(p.temp == 0.123457f);
    CHECK_INT(p.top_k, 20);
    CHECK_INT(p.penalty_last_n, -7);
    CHECK(p.top_p == 0.95f);
    CHECK_INT(sampler_check(&p, err, sizeof err), 0);
    sampler_params_free(&p);
    gguf_header_free(&h);
}

/* greedy: the first of equal maxima; top-k 1 the same through the sort */
TEST(sampler_greedy_and_top_k_1) {
    float lg[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, -INFINITY};
    sampler_params p;
    sampler_params_init(&p);
    p.seed = 7;
    p.temp = 0.0f;
    char err[128];
    sampler *s = sampler_new(&p, 6, NULL, NULL, 0, err, sizeof err);
    CHECK(s != NULL);
    if (!s) return;
    for (int i = 0; i < 5; i++) CHECK_INT(sampler_sample(s, lg), 1);
    sampler_free(s);
    p.temp = 0.8f;
    p.top_k = 1;
    s = sampler_new(&p, 6, NULL, NULL, 0, err, sizeof err);
    CHECK_INT(sampler_sample(s, lg), 1);
    size_t n;
    int64_t sel;
    int sorted;
    const smp_token *c = sampler_candidates(s, &n, &sel, &sorted);
    CHECK_INT((int)n, 1);
    CHECK_INT((int)sel, 0);
    CHECK(c[0].p == 1.0f);
    sampler_free(s);
    sampler_params_free(&p);
}

/* penalties over the prompt: repeat divides a positive logit and multiplies a negative one, then
 * count * freq + presence comes off */
TEST(sampler_penalties_arithmetic) {
    float lg[4] = {2.0f, -2.0f, 1.0f, 0.0f};
    sampler_params p;
    sampler_params_init(&p);
    p.seed = 1;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temp = 1.0f;
    p.penalty_repeat = 2.0f;
    p.penalty_freq = 0.25f;
    p.penalty_present = 0.5f;
    p.penalty_last_n = 3;
    char err[128];
    sampler *s = sampler_new(&p, 4, NULL, NULL, 0, err, sizeof err);
    CHECK(s != NULL);
    if (!s) return;
    /* window of 3: token 2 falls out, 0 twice, 1 once */
    sampler_accept(s, 2);
    sampler_accept(s, 0);
    sampler_accept(s, 1);
    sampler_accept(s, 0);
    sampler_sample(s, lg);
    size_t n;
    const smp_token *c = sampler_candidates(s, &n, NULL, NULL);
    CHECK_INT((int)n, 4);
    CHECK(c[0].logit == 2.0f / 2.0f - (2 * 0.25f + 0.5f));
    CHECK(c[1].logit == -2.0f * 2.0f - (0.25f + 0.5f));
    CHECK(c[2].logit == 1.0f);
    CHECK(c[3].logit == 0.0f);
    sampler_reset(s);
    sampler_sample(s, lg);
    c = sampler_candidates(s, &n, NULL, NULL);
    CHECK(c[0].logit == 2.0f);
    sampler_free(s);
    sampler_params_free(&p);
}

/* DRY over a toy vocabulary: after "a b c a b" the token c extends a repeat of 2 and loses
 * multiplier * base^(2 - allowed); the breaker token ":" is never penalised and cuts repeats */
static const char *toy[] = {"a", "b", "c", ":", "d"};
static const char *toy_piece(void *ctx, int32_t id, size_t *len) {
    (void)ctx;
    *len = strlen(toy[id]);
    return toy[id];
}

TEST(sampler_dry_penalty) {
    float lg[5] = {0, 0, 0, 0, 0};
    sampler_params p;
    sampler_params_init(&p);
    p.seed = 1;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temp = 1.0f;
    p.dry_multiplier = 0.5f;
    p.dry_allowed_length = 1;
    sampler_vocab v = {NULL, toy_piece, NULL};
    char err[128];
    sampler *s = sampler_new(&p, 5, &v, NULL, 0, err, sizeof err);
    CHECK(s != NULL);
    if (!s) return;
    int32_t hist[] = {0, 1, 2, 0, 1};
    for (int i = 0; i < 5; i++) sampler_accept(s, hist[i]);
    sampler_sample(s, lg);
    size_t n;
    const smp_token *c = sampler_candidates(s, &n, NULL, NULL);
    CHECK_INT((int)n, 5);
    CHECK(c[2].logit == -(float)(0.5 * pow(1.75, 1.0)));
    CHECK(c[0].logit == 0.0f);
    CHECK(c[3].logit == 0.0f);
    /* a breaker in the window: "a b : a b" repeats nothing past ':' */
    sampler_reset(s);
    int32_t hist2[] = {0, 1, 3, 0, 1};
    for (int i = 0; i < 5; i++) sampler_accept(s, hist2[i]);
    sampler_sample(s, lg);
    c = sampler_candidates(s, &n, NULL, NULL);
    CHECK(c[3].logit == 0.0f);
    sampler_free(s);
    /* DRY without the pieces is refused */
    CHECK(sampler_new(&p, 5, NULL, NULL, 0, err, sizeof err) == NULL);
    CHECK_STR(err, "DRY needs the vocabulary's pieces");
    sampler_params_free(&p);
}

/* n_probs over raw logits: partial sort order, softmax over all, the chosen token's p */
TEST(sampler_token_probs_raw) {
    float lg[5] = {1.0f, 3.0f, 2.0f, 3.0f, -INFINITY};
    smp_token work[5];
    sampler_prob top[5];
    float cp = -1;
    size_t k = sampler_token_probs(lg, 5, 2, 0, work, top, &cp);
    CHECK_INT((int)k, 2);
    /* std::partial_sort leaves 3 1 0 2 4 (g++ 12) */
    CHECK_INT(top[0].id, 3);
    CHECK_INT(top[1].id, 1);
    float e1 = expf(-2.0f), e2 = expf(-1.0f);
    float sum = 1.0f + 1.0f + e1 + e2 + 0.0f;
    CHECK(top[0].p == 1.0f / sum);
    CHECK(top[1].p == 1.0f / sum);
    CHECK(cp == e1 / sum);
    CHECK(sampler_logprob(0.0f) == -FLT_MAX);
    CHECK(sampler_logprob(1.0f) == 0.0f);
    k = sampler_token_probs(lg, 5, 9, 4, work, top, &cp);
    CHECK_INT((int)k, 5);
    CHECK(cp == 0.0f);
}

/* an unseeded sampler draws its own seeds: two of them differ (2^-32 chance of a false failure is
 * below the harness's notice); a seeded one repeats after reset */
TEST(sampler_seeds) {
    float lg[64];
    for (int i = 0; i < 64; i++) lg[i] = 0.0f;
    sampler_params p;
    sampler_params_init(&p);
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 123;
    char err[128];
    sampler *s = sampler_new(&p, 64, NULL, NULL, 0, err, sizeof err);
    int32_t a[8], b[8];
    for (int i = 0; i < 8; i++) a[i] = sampler_sample(s, lg);
    sampler_reset(s);
    for (int i = 0; i < 8; i++) b[i] = sampler_sample(s, lg);
    CHECK_MEM(a, b, sizeof a);
    /* draw = first index whose running sum reaches u * 64 with u from seed 123 */
    smp_mt19937 g;
    smp_mt_seed(&g, 123);
    double u = smp_uniform_double(&g);
    CHECK_INT(a[0], (int)ceil(u * 64.0) - 1 < 0 ? 0 : (int)ceil(u * 64.0) - 1);
    sampler_free(s);
    p.seed = SAMPLER_RANDOM_SEED;
    int differ = 0;
    for (int t = 0; t < 4 && !differ; t++) {
        sampler *x = sampler_new(&p, 64, NULL, NULL, 0, err, sizeof err);
        sampler *y = sampler_new(&p, 64, NULL, NULL, 0, err, sizeof err);
        for (int i = 0; i < 8; i++) differ |= sampler_sample(x, lg) != sampler_sample(y, lg);
        sampler_free(x);
        sampler_free(y);
    }
    CHECK(differ);
    sampler_params_free(&p);
}

/* every sampler on at once over 5000 tokens with a history (a path through the bucket sort, typical's
 * std::sort, top-p's adaptive sort, XTC and dynamic temperature, for the sanitizers): the drawn token
 * is the selected candidate and the candidates' probabilities sum to 1 within float rounding */
static const char *one_piece(void *ctx, int32_t id, size_t *len) {
    (void)ctx;
    static const char *p[] = {"x", "\n", ":", "ab", "b"};
    *len = strlen(p[id % 5]);
    return p[id % 5];
}

TEST(sampler_full_chain_runs) {
    enum { NV = 5000 };
    static float lg[NV];
    sampler_params p;
    sampler_params_init(&p);
    p.seed = 3;
    p.top_k = 0;
    p.typ_p = 0.95f;
    p.top_p = 0.9f;
    p.min_p = 0.01f;
    p.top_n_sigma = 3.0f;
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.001f;
    p.dynatemp_range = 0.4f;
    p.penalty_repeat = 1.2f;
    p.dry_multiplier = 0.7f;
    sampler_vocab v = {NULL, one_piece, NULL};
    char err[128];
    sampler *s = sampler_new(&p, NV, &v, NULL, 0, err, sizeof err);
    CHECK(s != NULL);
    if (!s) return;
    uint32_t x = 1;
    for (int i = 0; i < 300; i++) sampler_accept(s, i % 7 * 3);
    for (int step = 0; step < 5; step++) {
        for (int i = 0; i < NV; i++) {
            x = x * 1664525u + 1013904223u;
            lg[i] = (float)(x >> 8) / 16777216.0f * 12.0f - 6.0f;
        }
        int32_t id = sampler_sample(s, lg);
        size_t n;
        int64_t sel;
        const smp_token *c = sampler_candidates(s, &n, &sel, NULL);
        CHECK(sel >= 0 && (size_t)sel < n);
        CHECK_INT(c[sel].id, id);
        double sum = 0;
        for (size_t i = 0; i < n; i++) sum += c[i].p;
        CHECK(fabs(sum - 1.0) < 1e-4);
        sampler_accept(s, id);
    }
    sampler_free(s);
    sampler_params_free(&p);
}
