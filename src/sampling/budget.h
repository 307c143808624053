/*
 * budget.h -- the reasoning budget as llama.cpp b11669's sampler applies it
 * (common/reasoning-budget.cpp): after the start tag's tokens, at most N
 * generated tokens, then the forced sequence (the budget message's tokens
 * and the first end tag's) one token at a time, the other candidates set to
 * -INFINITY; an end tag generated before that ends the block. A new start
 * tag after the end arms it again.
 *
 * States (common_reasoning_budget_state):
 *   IDLE         waiting for the start sequence
 *   COUNTING     inside the block, counting the budget down
 *   FORCING      forcing the message and the end sequence
 *   WAITING_UTF8 the budget ran out inside a UTF-8 character: forcing waits
 *                for a token whose piece (special = false) ends complete
 *   DONE         passthrough, until a start sequence arms it again
 *
 * Sequences are matched over generated tokens only, as token_matcher's
 * Aho-Corasick does: after each token, the longest sequence ending there
 * since the last match (then the matcher starts over).
 *
 * Use: rb = rb_new(...); each step the caller asks rb_forced (>= 0: every
 * other candidate's logit becomes -INFINITY before the chain), and gives
 * every generated token to rb_accept.
 */
#ifndef BANKML_BUDGET_H
#define BANKML_BUDGET_H

#include <stddef.h>
#include <stdint.h>

enum { RB_IDLE = 0, RB_COUNTING, RB_FORCING, RB_WAITING_UTF8, RB_DONE };

typedef struct rb_state rb_state;

/* start[0..n_start): the start sequence; ends[k][0..end_lens[k]) the end
 * sequences (empty ones and repeats are dropped, as token_matcher's collect
 * does); forced[0..n_forced) what FORCING forces (it may be empty: then
 * FORCING forces nothing and ends after one token); budget the tokens
 * allowed (llama-server passes INT32_MAX for -1). utf8_complete(ctx, id):
 * 1 when the token's piece (special = false) ends with a complete UTF-8
 * sequence (common_utf8_is_complete). NULL when memory runs out. */
rb_state *rb_new(const int32_t *start, size_t n_start, const int32_t *const *ends, const size_t *end_lens,
                 size_t n_ends, const int32_t *forced, size_t n_forced, int32_t budget,
                 int (*utf8_complete)(void *ctx, int32_t id), void *ctx);
void rb_free(rb_state *rb);

/* The state (RB_*). */
int rb_state_of(const rb_state *rb);
/* The token forced at this step, -1 when none. */
int32_t rb_forced(const rb_state *rb);
/* common_reasoning_budget_accept: one generated token. */
void rb_accept(rb_state *rb, int32_t tok);
/* The end sequence that ended the block (common_reasoning_budget_get_end_match),
 * NULL when none; *n its length. */
const int32_t *rb_end_match(const rb_state *rb, size_t *n);

/* common_utf8_is_complete over s[0..n): an empty text is complete. */
int rb_utf8_complete(const char *s, size_t n);

#endif
