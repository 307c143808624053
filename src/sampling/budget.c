/*
 * budget.c -- the reasoning budget sampler of llama.cpp b11669
 * (common/reasoning-budget.cpp). See budget.h.
 */
#include <stdlib.h>
#include <string.h>

#include "sampling/budget.h"

/* token_matcher: the sequences, and the generated tokens since its last
 * match (the last max_len of them: no sequence looks further back). */
typedef struct {
    int32_t **seq;
    size_t *len;
    size_t n, max_len;
    int32_t *hist;
    size_t n_hist;
} rb_matcher;

struct rb_state {
    rb_matcher start, end;
    int32_t *forced;
    size_t n_forced;
    int32_t budget, remaining;
    int state;
    size_t force_pos;
    int end_match;
    int (*utf8_complete)(void *ctx, int32_t id);
    void *ctx;
};

static void rb_matcher_free(rb_matcher *m)
{
    for (size_t i = 0; i < m->n; i++) free(m->seq[i]);
    free(m->seq);
    free(m->len);
    free(m->hist);
}

static int rb_matcher_init(rb_matcher *m, const int32_t *const *seqs, const size_t *lens, size_t n)
{
    memset(m, 0, sizeof *m);
    m->seq = calloc(n ? n : 1, sizeof *m->seq);
    m->len = calloc(n ? n : 1, sizeof *m->len);
    if (!m->seq || !m->len) return -1;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] == 0) continue;
        int dup = 0;
        for (size_t k = 0; k < m->n && !dup; k++)
            dup = m->len[k] == lens[i] && !memcmp(m->seq[k], seqs[i], lens[i] * sizeof *seqs[i]);
        if (dup) continue;
        m->seq[m->n] = malloc(lens[i] * sizeof *seqs[i]);
        if (!m->seq[m->n]) return -1;
        memcpy(m->seq[m->n], seqs[i], lens[i] * sizeof *seqs[i]);
        m->len[m->n] = lens[i];
        if (lens[i] > m->max_len) m->max_len = lens[i];
        m->n++;
    }
    m->hist = malloc((m->max_len ? m->max_len : 1) * sizeof *m->hist);
    return m->hist ? 0 : -1;
}

static void rb_matcher_reset(rb_matcher *m) { m->n_hist = 0; }

/* token_matcher::advance: the index of the longest sequence that ends the
 * tokens since the last match, -1 none (a match starts it over). */
static int rb_matcher_advance(rb_matcher *m, int32_t tok)
{
    if (m->max_len == 0) return -1;
    if (m->n_hist == m->max_len) {
        memmove(m->hist, m->hist + 1, (m->max_len - 1) * sizeof *m->hist);
        m->n_hist--;
    }
    m->hist[m->n_hist++] = tok;
    int best = -1;
    for (size_t k = 0; k < m->n; k++) {
        size_t l = m->len[k];
        if (l > m->n_hist) continue;
        if (memcmp(m->hist + m->n_hist - l, m->seq[k], l * sizeof *m->hist)) continue;
        if (best < 0 || l > m->len[best]) best = (int)k;
    }
    if (best >= 0) m->n_hist = 0;
    return best;
}

rb_state *rb_new(const int32_t *start, size_t n_start, const int32_t *const *ends, const size_t *end_lens,
                 size_t n_ends, const int32_t *forced, size_t n_forced, int32_t budget,
                 int (*utf8_complete)(void *ctx, int32_t id), void *ctx)
{
    rb_state *rb = calloc(1, sizeof *rb);
    if (!rb) return NULL;
    const int32_t *const starts[1] = {start};
    size_t slen[1] = {n_start};
    if (rb_matcher_init(&rb->start, starts, slen, 1) || rb_matcher_init(&rb->end, ends, end_lens, n_ends)) {
        rb_free(rb);
        return NULL;
    }
    rb->forced = malloc((n_forced ? n_forced : 1) * sizeof *rb->forced);
    if (!rb->forced) {
        rb_free(rb);
        return NULL;
    }
    if (n_forced) memcpy(rb->forced, forced, n_forced * sizeof *forced);
    rb->n_forced = n_forced;
    rb->budget = rb->remaining = budget;
    rb->state = RB_IDLE;
    rb->end_match = -1;
    rb->utf8_complete = utf8_complete;
    rb->ctx = ctx;
    return rb;
}

void rb_free(rb_state *rb)
{
    if (!rb) return;
    rb_matcher_free(&rb->start);
    rb_matcher_free(&rb->end);
    free(rb->forced);
    free(rb);
}

int rb_state_of(const rb_state *rb) { return rb->state; }

int32_t rb_forced(const rb_state *rb)
{
    if (rb->state != RB_FORCING || rb->force_pos >= rb->n_forced) return -1;
    return rb->forced[rb->force_pos];
}

/* Armed by a start sequence: counting, or forcing at once on a budget of 0. */
static void rb_arm(rb_state *rb)
{
    rb->state = RB_COUNTING;
    rb->remaining = rb->budget;
    if (rb->remaining <= 0) {
        rb->state = RB_FORCING;
        rb->force_pos = 0;
    }
}

void rb_accept(rb_state *rb, int32_t tok)
{
    switch (rb->state) {
    case RB_IDLE:
        if (rb_matcher_advance(&rb->start, tok) >= 0) rb_arm(rb);
        break;
    case RB_COUNTING:
    case RB_WAITING_UTF8: {
        int m = rb_matcher_advance(&rb->end, tok);
        if (m >= 0) {
            rb->state = RB_DONE;
            rb->end_match = m;
            break;
        }
        int complete = rb->utf8_complete ? rb->utf8_complete(rb->ctx, tok) : 1;
        if (rb->state == RB_WAITING_UTF8) {
            if (complete) {
                rb->state = RB_FORCING;
                rb->force_pos = 0;
                rb_matcher_reset(&rb->end);
            }
        } else if (--rb->remaining <= 0) {
            rb->state = complete ? RB_FORCING : RB_WAITING_UTF8;
            rb->force_pos = 0;
            rb_matcher_reset(&rb->end);
        }
        break;
    }
    case RB_FORCING: {
        int m = rb_matcher_advance(&rb->end, tok);
        if (++rb->force_pos >= rb->n_forced) {
            rb->state = RB_DONE;
            rb->end_match = m;
        }
        break;
    }
    case RB_DONE:
        if (rb_matcher_advance(&rb->start, tok) >= 0) {
            rb_matcher_reset(&rb->end);
            rb->end_match = -1;
            rb_arm(rb);
        }
        break;
    default: break;
    }
}

const int32_t *rb_end_match(const rb_state *rb, size_t *n)
{
    if (rb->end_match < 0) {
        *n = 0;
        return NULL;
    }
    *n = rb->end.len[rb->end_match];
    return rb->end.seq[rb->end_match];
}

int rb_utf8_complete(const char *s, size_t n)
{
    if (n == 0) return 1;
    for (size_t i = 1; i <= (n < 4 ? n : 4); i++) {
        unsigned char c = (unsigned char)s[n - i];
        if ((c & 0xC0) != 0x80) {
            size_t expected = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            return i >= expected;
        }
    }
    return 0;
}
