/* test_rules.c -- the engine's pure rules (engine.h): llama-server's prompt-cache
 * reuse, UTF-8 completeness, stop-string hold-back and registry names. */
#include <string.h>

#include "engine/engine.h"
#include "test.h"

TEST(engine_reuse_prefix_rule)
{
    int32_t slot[] = {1, 2, 3, 4, 5};
    int32_t p1[] = {1, 2, 3, 9};
    int32_t p2[] = {1, 2, 3};
    int32_t p3[] = {7, 8};
    CHECK_INT((long)engine_reuse(slot, 5, p1, 4, 1), 3);      /* longest common prefix */
    CHECK_INT((long)engine_reuse(slot, 5, p2, 3, 1), 2);      /* all cached: one less */
    CHECK_INT((long)engine_reuse(slot, 5, slot, 5, 1), 4);
    CHECK_INT((long)engine_reuse(slot, 5, p3, 2, 1), 0);
    CHECK_INT((long)engine_reuse(slot, 5, p1, 4, 0), 0);      /* cache_prompt false */
    CHECK_INT((long)engine_reuse(NULL, 0, p1, 4, 1), 0);      /* empty slot */
    CHECK_INT((long)engine_reuse(slot, 2, p1, 4, 1), 2);      /* the slot shorter than the prompt */
}

TEST(engine_utf8_complete_cuts_an_open_sequence)
{
    CHECK_INT((long)engine_utf8_complete("abc", 3), 3);
    CHECK_INT((long)engine_utf8_complete("a\xC3", 2), 1);            /* 2-byte lead alone */
    CHECK_INT((long)engine_utf8_complete("a\xC3\xA9", 3), 3);        /* é complete */
    CHECK_INT((long)engine_utf8_complete("\xF0\x9F\x8D", 3), 0);     /* 3 of 4 bytes of 🍕 */
    CHECK_INT((long)engine_utf8_complete("\xF0\x9F\x8D\x95", 4), 4);
    CHECK_INT((long)engine_utf8_complete("x\xE2\x82", 3), 1);
    /* as validate_utf8: a cut lead byte holds back the ASCII after it too */
    CHECK_INT((long)engine_utf8_complete("ab\xE2)", 4), 2);
    CHECK_INT((long)engine_utf8_complete("\xF0xy", 3), 0);
    CHECK_INT((long)engine_utf8_complete("\xF0xyzw", 5), 5);       /* 4 bytes back is the limit */
}

TEST(engine_partial_stop_finds_the_longest_suffix)
{
    CHECK_INT((long)engine_partial_stop("hello wo", 8, "world", 5), 6);
    CHECK_INT((long)engine_partial_stop("hello w", 7, "world", 5), 6);
    CHECK_INT((long)engine_partial_stop("hello", 5, "world", 5), -1);
    CHECK_INT((long)engine_partial_stop("abab", 4, "abc", 3), 2);
}

/* Feeds pieces; returns what was released, joined with '|' per token
 * ("-" for a token that released nothing, "#" for an incomplete one). */
static void feed(engine_stopper *s, const char *const *pieces, size_t n, char *out, size_t outlen)
{
    out[0] = 0;
    for (size_t i = 0; i < n && !s->stopped; i++) {
        const char *send;
        size_t len;
        int ok = engine_stopper_push(s, pieces[i], strlen(pieces[i]), 0, &send, &len);
        size_t o = strlen(out);
        if (!ok) snprintf(out + o, outlen - o, "#|");
        else if (!len) snprintf(out + o, outlen - o, "-|");
        else snprintf(out + o, outlen - o, "%.*s|", (int)len, send);
    }
}

TEST(engine_stop_string_held_back_across_tokens)
{
    const char *stops[] = {"re w"};
    size_t lens[] = {4};
    const char *pieces[] = {"The", " sto", "re", " was", " big"};
    engine_stopper s;
    char out[256];
    engine_stopper_init(&s, stops, lens, 1);
    feed(&s, pieces, 5, out, sizeof out);
    /* " sto" is sent, "re" is held (it could begin "re w"), " was" completes the stop */
    CHECK_STR(out, "The| sto|-|-|");
    CHECK_INT(s.stopped, 1);
    CHECK_INT((long)s.stop_word, 0);
    CHECK_INT((long)s.text.len, 7);
    CHECK_MEM(s.text.p, "The sto", 7);
    engine_stopper_free(&s);
}

TEST(engine_stop_hold_back_released_when_not_a_stop)
{
    const char *stops[] = {"END", "re w"};
    size_t lens[] = {3, 4};
    const char *pieces[] = {"mo", "re", " please", "E", "x"};
    engine_stopper s;
    char out[256];
    engine_stopper_init(&s, stops, lens, 2);
    feed(&s, pieces, 5, out, sizeof out);
    CHECK_STR(out, "mo|-|re please|-|Ex|");
    CHECK_INT(s.stopped, 0);
    CHECK_INT((long)s.n_sent, 13);
    engine_stopper_free(&s);
}

TEST(engine_stop_incomplete_utf8_waits)
{
    engine_stopper s;
    char out[64];
    const char *pieces[] = {"a", "\xF0\x9F", "\x8D\x95", "b"};
    engine_stopper_init(&s, NULL, NULL, 0);
    feed(&s, pieces, 4, out, sizeof out);
    CHECK_STR(out, "a|#|\xF0\x9F\x8D\x95|b|");
    engine_stopper_free(&s);
}

TEST(engine_registry_names)
{
    char n[64];
    engine_model_name("/x/Bonsai-8B-Q1_0.gguf", n, sizeof n);
    CHECK_STR(n, "bonsai-8b-q1_0");
    engine_model_name("demo.GGUF", n, sizeof n);
    CHECK_STR(n, "demo");
    CHECK_INT(engine_name_matches("/m/Bonsai-8B-Q1_0.gguf", "bonsai-8b-q1_0"), 1);
    CHECK_INT(engine_name_matches("/m/Bonsai-8B-Q1_0.gguf", "Bonsai-8B-Q1_0:latest"), 1);
    CHECK_INT(engine_name_matches("/m/Bonsai-8B-Q1_0.gguf", "BONSAI-8B-Q1_0.GGUF"), 1);
    CHECK_INT(engine_name_matches("/m/Bonsai-8B-Q1_0.gguf", "bonsai-8b"), 0);
    CHECK_INT(engine_name_matches("/m/Bonsai-8B-Q1_0.gguf", "bonsai-8b-q1_0:v2"), 0);
}

TEST(engine_doubles_as_nlohmann_prints_them)
{
    jbuf b;
    jbuf_init(&b);
    json_put_double(&b, 0.0);
    jbuf_putc(&b, ' ');
    json_put_double(&b, (double)0.95f);
    jbuf_putc(&b, ' ');
    json_put_double(&b, 2.0);
    jbuf_putc(&b, ' ');
    json_put_double(&b, -3.4028234663852886e+38);
    CHECK_STR(b.p, "0.0 0.949999988079071 2.0 -3.4028234663852886e+38");
    jbuf_free(&b);
}
