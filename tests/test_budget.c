/*
 * test_budget.c -- sampling/budget.c: the reasoning budget's states as
 * common/reasoning-budget.cpp moves them.
 */
#include "test.h"
#include "sampling/budget.h"

/* token 9 ends inside a UTF-8 character; every other one is complete */
static int utf8_fn(void *ctx, int32_t id)
{
    (void)ctx;
    return id != 9;
}

TEST(budget_counts_forces_and_rearms)
{
    const int32_t start[] = {1, 2};
    const int32_t end_a[] = {7}, end_b[] = {6, 7}, empty[] = {0};
    const int32_t *ends[] = {end_a, empty, end_b, end_a};
    const size_t lens[] = {1, 0, 2, 1};
    const int32_t forced[] = {5, 5, 7};
    rb_state *rb = rb_new(start, 2, ends, lens, 4, forced, 3, 2, utf8_fn, NULL);
    CHECK(rb != NULL);
    if (!rb) return;
    CHECK_INT(rb_state_of(rb), RB_IDLE);
    rb_accept(rb, 2);                       /* the start's second token alone is no start */
    rb_accept(rb, 1);
    CHECK_INT(rb_state_of(rb), RB_IDLE);
    rb_accept(rb, 2);
    CHECK_INT(rb_state_of(rb), RB_COUNTING);
    CHECK_INT(rb_forced(rb), -1);
    rb_accept(rb, 3);
    CHECK_INT(rb_state_of(rb), RB_COUNTING);
    rb_accept(rb, 9);                       /* the budget runs out inside a character: wait */
    CHECK_INT(rb_state_of(rb), RB_WAITING_UTF8);
    CHECK_INT(rb_forced(rb), -1);
    rb_accept(rb, 4);
    CHECK_INT(rb_state_of(rb), RB_FORCING);
    CHECK_INT(rb_forced(rb), 5);
    rb_accept(rb, 5);
    CHECK_INT(rb_forced(rb), 5);
    rb_accept(rb, 5);
    CHECK_INT(rb_forced(rb), 7);
    rb_accept(rb, 7);
    CHECK_INT(rb_state_of(rb), RB_DONE);
    size_t n = 0;
    const int32_t *m = rb_end_match(rb, &n);
    CHECK(m != NULL);
    CHECK_INT(n, 1);                        /* the longest end ending at 7 since the reset: {7} ({6,7} needs a 6) */
    /* a new start re-arms; an end tag before the budget ends the block, the longest one reported */
    rb_accept(rb, 1);
    rb_accept(rb, 2);
    CHECK_INT(rb_state_of(rb), RB_COUNTING);
    CHECK(rb_end_match(rb, &n) == NULL);
    rb_accept(rb, 6);
    rb_accept(rb, 7);
    CHECK_INT(rb_state_of(rb), RB_DONE);
    m = rb_end_match(rb, &n);
    CHECK_INT(n, 2);
    rb_free(rb);
    /* budget 0 forces at once; nothing to force ends after one token */
    rb = rb_new(start, 2, ends, lens, 1, NULL, 0, 0, utf8_fn, NULL);
    rb_accept(rb, 1);
    rb_accept(rb, 2);
    CHECK_INT(rb_state_of(rb), RB_FORCING);
    CHECK_INT(rb_forced(rb), -1);
    rb_accept(rb, 3);
    CHECK_INT(rb_state_of(rb), RB_DONE);
    CHECK(rb_end_match(rb, &n) == NULL);
    rb_free(rb);
    /* common_utf8_is_complete */
    CHECK_INT(rb_utf8_complete("", 0), 1);
    CHECK_INT(rb_utf8_complete("ab", 2), 1);
    CHECK_INT(rb_utf8_complete("a\xc3", 2), 0);
    CHECK_INT(rb_utf8_complete("\xc3\xa9", 2), 1);
    CHECK_INT(rb_utf8_complete("\xe2\x82", 2), 0);
    CHECK_INT(rb_utf8_complete("\xf0\x9f\x98\x80", 4), 1);
    CHECK_INT(rb_utf8_complete("\x80\x80\x80\x80", 4), 0);
}
