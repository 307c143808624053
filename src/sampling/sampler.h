/*
 * sampler.h -- llama-server b11669's sampler chain, its request parameters
 * and its token probabilities, reproduced bit for bit.
 *
 * The chain is llama-server's default order:
 *   [logit bias] -> penalties -> DRY -> top-n-sigma -> top-k -> typical-p
 *   -> top-p -> min-p -> XTC -> temperature (dynamic when a range is set)
 *   -> dist
 * with llama.cpp's float order in every step, libstdc++'s std::sort,
 * std::partial_sort and llama.cpp's bucket sort (their tie orders decide
 * draws), std::mt19937 and libstdc++'s generate_canonical.
 *
 * Use, per request (what llama-server's slot does):
 *   sampler_params p;  sampler_params_init(&p);          llama-server's defaults
 *   sampler_gguf_defaults(&p, header, err, n);            general.sampling.* over them
 *   sampler_resolve(&req_p, &p, request_json, err, n);    the request over those
 *   s = sampler_new(&req_p, n_vocab, &vocab, err, n);
 *   for each prompt token: sampler_accept(s, id);         (llama-server accepts the
 *                                                          whole prompt, cached or not)
 *   loop: id = sampler_sample(s, logits); sampler_accept(s, id);
 *         if (req_p.n_probs > 0) sampler_token_probs(...);
 */
#ifndef BANKML_SAMPLER_H
#define BANKML_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* llama.cpp's LLAMA_DEFAULT_SEED: "draw a random seed". */
#define SAMPLER_RANDOM_SEED 0xFFFFFFFFu

/* One candidate, laid out as llama_token_data. */
typedef struct {
    int32_t id;
    float logit;
    float p;
} smp_token;

/* The samplers of llama.cpp's common_sampler_type, in the values the
 * `samplers` field names them by. */
enum {
    SMP_DRY = 1, SMP_TOP_K, SMP_TOP_P, SMP_MIN_P, SMP_TYPICAL_P, SMP_TEMPERATURE,
    SMP_XTC, SMP_INFILL, SMP_PENALTIES, SMP_TOP_N_SIGMA, SMP_ADAPTIVE_P
};

#define SAMPLER_MAX_ORDER 64

/* common_params_sampling's fields that a request or a GGUF can set. */
typedef struct {
    uint32_t seed;
    int32_t n_probs;
    int32_t min_keep;
    int32_t top_k;
    float top_p, min_p;
    float xtc_probability, xtc_threshold;
    float typ_p;
    float temp, dynatemp_range, dynatemp_exponent;
    int32_t penalty_last_n;
    float penalty_repeat, penalty_freq, penalty_present;
    float dry_multiplier, dry_base;
    int32_t dry_allowed_length, dry_penalty_last_n;
    int32_t mirostat;
    float mirostat_tau, mirostat_eta;
    float top_n_sigma;
    float adaptive_target, adaptive_decay;
    int post_sampling_probs;        /* report probabilities after the chain */
    /* DRY's sequence breakers (owned; sampler_params_free releases them). */
    char **dry_breakers;
    size_t *dry_breaker_lens;
    size_t n_dry_breakers;
    /* the sampler order (SMP_*), as `samplers` / general.sampling.sequence set it */
    uint8_t order[SAMPLER_MAX_ORDER];
    size_t n_order;
    int order_from_gguf;            /* the order came from general.sampling.sequence */
} sampler_params;

/* llama-server's defaults (common.h): temp 0.8, top-k 40, top-p 0.95,
 * min-p 0.05, penalty_last_n 64, DRY off (base 1.75, allowed 2, last_n 64,
 * breakers "\n" ":" "\"" "*"), seed random, ... Returns 0, or -1 when
 * memory runs out. */
int sampler_params_init(sampler_params *p);
void sampler_params_free(sampler_params *p);
/* A deep copy of src into dst (dst uninitialised). 0, or -1 on memory. */
int sampler_params_copy(sampler_params *dst, const sampler_params *src);
/* No DRY sequence breakers at all (llama-server's --dry-sequence-breaker
 * none), which no request field can say: an empty dry_sequence_breakers is
 * an error there. */
void sampler_params_no_breakers(sampler_params *p);

/* The GGUF's general.sampling.* keys over p, as llama.cpp reads them: each
 * value rendered as llama_model_meta_val_str renders it (std::to_string:
 * "%f" for floats, so 0.1234567 reads back as 0.123457) then strtol/strtof;
 * keys top_k, top_p, min_p, xtc_probability, xtc_threshold, temp,
 * penalty_last_n, penalty_repeat, mirostat, mirostat_tau, mirostat_eta and
 * sequence (';'-separated sampler names). Returns 0, or -1 on memory. */
#ifdef BANKML_GGUF_H    /* declared when src/file/gguf.h is in (it clashes with ggml's gguf.h in the kit) */
int sampler_gguf_defaults(sampler_params *p, const gguf_header *h, char *err, size_t errlen);
#endif

/* The request (a parsed JSON object: /completion's or /v1's body after the
 * OpenAI mapping) over the defaults d, into out (uninitialised; free it
 * with sampler_params_free whatever the result). Reads, in llama-server's
 * order: top_k, top_p, min_p, top_n_sigma, xtc_probability, xtc_threshold,
 * typical_p, temperature, dynatemp_range, dynatemp_exponent, repeat_last_n,
 * repeat_penalty, frequency_penalty, presence_penalty, dry_multiplier,
 * dry_base, dry_allowed_length, dry_penalty_last_n, mirostat, mirostat_tau,
 * mirostat_eta, adaptive_target, adaptive_decay, seed, n_probs (else
 * logprobs), min_keep, post_sampling_probs, dry_sequence_breakers, samplers.
 * null means absent. Returns 0, or -1 with llama-server's 400 message in err
 * ("Field 'top_k': [json.exception.type_error.302] type must be number, but
 * is string", "Field 'repeat_last_n': Value must be between 0 <= value <=
 * 2147483647, but got -1", "Failed to initialize samplers: penalty_repeat
 * must be finite and greater than 0", ...), or with bankml's reason for what
 * it does not reproduce (mirostat, a sampler order other than the default). */
int sampler_resolve(sampler_params *out, const sampler_params *d, const json_value *req,
                    char *err, size_t errlen);

/* The checks llama-server makes when it builds the chain (common_sampler_init)
 * and bankml's refusals; sampler_resolve ends with it. 0, or -1 with the
 * message. */
int sampler_check(const sampler_params *p, char *err, size_t errlen);

/* OpenAI's `logprobs`/`top_logprobs` (/v1/chat/completions) as llama-server
 * maps them: logprobs true -> *n_probs = top_logprobs (default 20) and
 * *set = 1; top_logprobs without logprobs true -> -1 with "top_logprobs
 * requires logprobs to be set to true". Otherwise *set = 0. */
int sampler_oai_logprobs(const json_value *body, int32_t *n_probs, int *set,
                         char *err, size_t errlen);

/* What DRY needs from the vocabulary: each token's text as llama.cpp's
 * llama_vocab::detokenize({id}, special=true) gives it (for SentencePiece
 * vocabularies without the leading space of add_space_prefix), and, for a
 * breaker longer than one byte, the tokenizer (add_special and
 * parse_special false; *ids malloc'd, free()d by the sampler). tokenize may
 * be NULL when every breaker is one byte long. */
typedef struct {
    void *ctx;
    const char *(*piece)(void *ctx, int32_t id, size_t *len);
    int (*tokenize)(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n);
} sampler_vocab;

/* Logit biases applied first (llama_sampler_logit_bias: the vocabulary's
 * suppress tokens with -INFINITY, the request's logit_bias). */
typedef struct {
    int32_t token;
    float bias;
} sampler_bias;

typedef struct sampler sampler;

/* Builds the chain for n_vocab tokens and seeds it (SAMPLER_RANDOM_SEED:
 * dist and XTC each draw their own seed from getrandom, as llama.cpp's
 * std::random_device does). vocab may be NULL when DRY is off. biases may
 * be NULL. Returns NULL with a reason on a bad argument, a tokenizer failure
 * or memory. */
sampler *sampler_new(const sampler_params *p, int32_t n_vocab, const sampler_vocab *vocab,
                     const sampler_bias *biases, size_t n_biases, char *err, size_t errlen);
void sampler_free(sampler *s);

/* llama-server's init_sampler: forgets the history, reseeds dist and XTC. */
void sampler_reset(sampler *s);

/* One token into the penalties' and DRY's windows (prompt and generated
 * tokens alike). Returns 0, or -1 when memory runs out. */
int sampler_accept(sampler *s, int32_t token);

/* Runs the chain over logits[0..n_vocab) and draws a token (it does not
 * accept it: call sampler_accept). Returns the token, or -1 when nothing
 * can be drawn. */
int32_t sampler_sample(sampler *s, const float *logits);

/* A constraint on the draw, as llama-server's grammar sampler: allows(ctx,
 * id) is 1 when the token may come next, 0 when not, -1 on failure;
 * apply(ctx, c, n) sets the logit of every candidate it rejects to
 * -INFINITY (0, or -1 on failure). */
typedef struct {
    void *ctx;
    int (*allows)(void *ctx, int32_t id);
    int (*apply)(void *ctx, smp_token *c, size_t n);
} sampler_constraint;

/* common_sampler_sample under a grammar (grammar_first false, as
 * llama-server calls it): the chain draws from the raw logits first; when
 * the constraint rejects that token, the candidates are rebuilt from the
 * logits, the constraint applied to every one of them, and the whole chain
 * runs again (dist and XTC draw again from their generators, as in
 * llama.cpp), *resampled = 1. g NULL is sampler_sample. Returns the token,
 * -1 when nothing can be drawn, -2 when the constraint failed (its reason
 * is its own). It does not accept the token. */
int32_t sampler_sample_constrained(sampler *s, const float *logits, const sampler_constraint *g, int *resampled);

/* The candidates the chain left after the last sampler_sample (the array
 * llama.cpp's cur_p holds), and the index of the drawn one. */
const smp_token *sampler_candidates(const sampler *s, size_t *n, int64_t *selected, int *sorted);

/* One reported probability. */
typedef struct {
    int32_t id;
    float p;
} sampler_prob;

/* llama-server's n_probs over the raw logits (get_token_probabilities): the
 * n_top most likely tokens by std::partial_sort, softmax over the whole
 * vocabulary summed in the order the partial sort left it. Writes
 * min(n_top, n_vocab) entries to top[] and the probability of token `chosen`
 * to *chosen_p (0 when absent); returns the number written. work holds
 * n_vocab candidates. */
size_t sampler_token_probs(const float *logits, int32_t n_vocab, size_t n_top, int32_t chosen,
                           smp_token *work, sampler_prob *top, float *chosen_p);

/* The same after the chain (post_sampling_probs): the last draw's candidates
 * sorted by probability (std::sort when the chain left them unsorted),
 * stopping at the first zero. Reorders the sampler's candidates. */
size_t sampler_post_probs(sampler *s, size_t n_top, int32_t chosen, sampler_prob *top,
                          float *chosen_p);

/* llama-server's logprob: logf(p), or -FLT_MAX for p == 0 (JSON has no -inf). */
float sampler_logprob(float p);

/* ---- pieces exposed for tests ---- */

/* std::mt19937. */
typedef struct {
    uint32_t mt[624];
    int idx;
} smp_mt19937;
void smp_mt_seed(smp_mt19937 *g, uint32_t seed);
uint32_t smp_mt_next(smp_mt19937 *g);
/* std::uniform_real_distribution<double>(0, 1) and <float>(0, 1) under
 * libstdc++ (generate_canonical: two outputs for a double, one for a float). */
double smp_uniform_double(smp_mt19937 *g);
float smp_uniform_float(smp_mt19937 *g);
/* std::sort / std::partial_sort by logit, descending, as libstdc++ does them. */
void smp_sort_by_logit(smp_token *a, size_t n);
void smp_partial_sort_by_logit(smp_token *a, size_t middle, size_t n);

#endif
