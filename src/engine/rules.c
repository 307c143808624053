/*
 * rules.c -- llama-server b11669's pure slot rules (prompt reuse, UTF-8
 * holding back, stop strings) and the registry's names. See engine.h.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "engine/engine.h"


size_t engine_reuse(const int32_t *slot, size_t n_slot, const int32_t *prompt, size_t n_prompt,
                    int cache_prompt)
{
    size_t n = 0;
    if (!cache_prompt) return 0;
    while (n < n_slot && n < n_prompt && slot[n] == prompt[n]) n++;
    if (n == n_prompt && n > 0) n--;
    return n;
}

size_t engine_utf8_complete(const char *s, size_t n)
{
    /* llama-server's validate_utf8: every one of the last 4 bytes is looked
     * at, and a lead byte whose sequence would run past the end makes the
     * text incomplete from there, even with ASCII after it ("\xE2)" holds
     * back both bytes). The probability entries and the streamed text wait
     * on the same answer. */
    for (size_t i = 1; i <= 4 && i <= n; i++) {
        unsigned char c = (unsigned char)s[n - i];
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (need > i) return n - i;
    }
    return n;
}

size_t engine_partial_stop(const char *text, size_t n, const char *word, size_t wn)
{
    /* string_find_partial_stop: the longest suffix of text that is a prefix
     * of word; llama.cpp checks from the full word length down to 1 */
    if (!wn || !n) return (size_t)-1;
    char last = text[n - 1];
    for (size_t len = wn < n ? wn : n; len > 0; len--) {
        if (word[len - 1] != last) continue;
        if (!memcmp(text + n - len, word, len)) return n - len;
    }
    return (size_t)-1;
}

void engine_stopper_init(engine_stopper *s, const char *const *stops, const size_t *lens, size_t n)
{
    memset(s, 0, sizeof *s);
    jbuf_init(&s->text);
    s->stops = stops;
    s->stop_lens = lens;
    s->n_stops = n;
}

void engine_stopper_free(engine_stopper *s) { jbuf_free(&s->text); }

/* find_stopping_strings over text[pos..len): a full match searched in the
 * window the last token can have completed, or a partial one at the end. */
static size_t find_stop(engine_stopper *s, size_t pos, size_t last_len, int full, size_t *which)
{
    size_t best = (size_t)-1;
    const char *t = s->text.p + pos;
    size_t n = s->text.len - pos;
    for (size_t i = 0; i < s->n_stops; i++) {
        const char *w = s->stops[i];
        size_t wn = s->stop_lens[i], p = (size_t)-1;
        if (full) {
            size_t tmp = wn + last_len, from = n > tmp ? n - tmp : 0;
            if (wn <= n)
                for (size_t k = from; k + wn <= n; k++)
                    if (!memcmp(t + k, w, wn)) { p = k; break; }
            if (wn == 0) p = from <= n ? from : (size_t)-1;
        } else {
            p = engine_partial_stop(t, n, w, wn);
        }
        if (p != (size_t)-1 && (best == (size_t)-1 || p < best)) {
            best = p;
            if (which) *which = i;
        }
    }
    return best;
}

int engine_stopper_push(engine_stopper *s, const char *piece, size_t n, int is_eog,
                        const char **send, size_t *send_len)
{
    jbuf_put(&s->text, piece, n);
    *send = "";
    *send_len = 0;
    if (engine_utf8_complete(s->text.p, s->text.len) < s->text.len) return 0;
    size_t pos = s->n_sent < s->text.len ? s->n_sent : s->text.len, which = 0;
    int send_text = 1;
    size_t sp = find_stop(s, pos, n, 1, &which);
    if (sp != (size_t)-1) {
        s->stopped = 1;
        s->stop_word = which;
        s->text.len = pos + sp;
        s->text.p[s->text.len] = 0;
        pos = s->n_sent < s->text.len ? s->n_sent : s->text.len;
    } else if (!is_eog) {
        send_text = find_stop(s, pos, n, 0, NULL) == (size_t)-1;
    }
    if (send_text) {
        *send = s->text.p + pos;
        *send_len = s->text.len - pos;
        s->n_sent += *send_len;
    }
    return 1;
}

void engine_model_name(const char *file, char *out, size_t outlen)
{
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    size_t n = strlen(b);
    if (n > 5 && !strcasecmp(b + n - 5, ".gguf")) n -= 5;
    if (n >= outlen) n = outlen ? outlen - 1 : 0;
    for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)b[i]);
    if (outlen) out[n] = 0;
}

size_t engine_name_base(const char *name, size_t len)
{
    /* longest first where one ends another (q2_0_g64 before q2_0) */
    static const char *const sfx[] = {"-q2_0_g64", "-q4_k_m", "-q4_k_s", "-q5_k_m", "-q5_k_s", "-q3_k_m", "-q3_k_s",
                                      "-q3_k_l", "-iq4_nl", "-iq4_xs", "-bf16", "-q1_0", "-q2_0", "-q8_0", "-q4_0",
                                      "-q4_1", "-q5_0", "-q5_1", "-q2_k", "-q3_k", "-q4_k", "-q5_k", "-q6_k", "-f16",
                                      "-f32"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        size_t k = strlen(sfx[i]);
        if (len > k && !strncasecmp(name + len - k, sfx[i], k)) return len - k;
    }
    return len;
}

int engine_name_matches(const char *file, const char *asked)
{
    char name[512];
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    engine_model_name(file, name, sizeof name);
    size_t an = strlen(asked), nn = strlen(name);
    if (!strcasecmp(asked, b)) return 1;
    if (!strcasecmp(asked, name)) return 1;
    if (an == nn + 7 && !strncasecmp(asked, name, nn) && !strcasecmp(asked + nn, ":latest")) return 1;
    return 0;
}
