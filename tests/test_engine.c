/*
 * test_engine.c -- the engine through engine.h only: a real slot on
 * stories260K (../shared, pinned here into a mkdtemp FORK.json; SKIP
 * without it). The prompt-cache reuse rule, the host prompt cache, stop
 * strings, the budget and the context limit, cancellation, the registry
 * and its error kinds, seeded sampling, and slots and batches (-np, -b,
 * -ub: what engine_new refuses, the per-slot context, slot selection with
 * llama-server b11669's measured answers, the decode-call size), and the
 * progress events (on_progress before and after each decode call), and
 * reading without the engine lock (engine_peek: an unload waits for it).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "file/pin.h"
#include "test.h"

/* ---- fixture: stories260K pinned into a temporary FORK.json ------------- */

static char tmpdir[64];
static char fork_path[128];
static char model_path[4096];

/* Pins stories260K into stories260K.FORK.json in a new temporary
 * directory, once: 1 done, 0 when ../shared has no stories260K, -1 when
 * the pin could not be written. */
static int fixture(void)
{
    static int state;          /* 0 not tried, 1 ready, -1 failed */
    const char *p = test_shared("models/stories260K.gguf");
    if (!p) return 0;
    if (state) return state;
    state = -1;
    snprintf(model_path, sizeof model_path, "%s", p);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/bankml-test-engine-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        tmpdir[0] = 0;
        return state;
    }
    snprintf(fork_path, sizeof fork_path, "%s/stories260K.FORK.json", tmpdir);
    char sha[65], err[512];
    if (pin_write(model_path, fork_path, sha, err, sizeof err) != 0) {
        fprintf(stderr, "test_engine: %s\n", err);
        return state;
    }
    return state = 1;
}

/* Removes the fixture's files (registered once, run at exit). */
static void fixture_rm(void)
{
    char p[256];
    if (!tmpdir[0]) return;
    const char *names[] = {"stories260K.FORK.json", "other.FORK.json", "wrong.FORK.json", "stories260K.gguf",
                           "unpinned.gguf", "wrong.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, names[i]);
        unlink(p);
    }
    rmdir(tmpdir);
}

__attribute__((constructor)) static void fixture_at_exit(void) { atexit(fixture_rm); }

#define NEED_MODEL()                                                                   \
    do {                                                                               \
        int f_ = fixture();                                                            \
        if (f_ == 0) SKIP("../shared/models/stories260K.gguf is absent");              \
        if (f_ < 0) {                                                                  \
            CHECK(!"stories260K could not be pinned into a temporary directory");      \
            return;                                                                    \
        }                                                                              \
    } while (0)

/* An engine with stories260K as entry 0; cache_on/limit for the host
 * prompt cache, n_ctx its context (0: 4096). */
static engine *open_opts(const engine_opts *o)
{
    engine_error er;
    engine *e = engine_new(o, &er);
    if (!e) return NULL;
    if (engine_add(e, "stories260K.gguf", model_path, fork_path, 1) != 0) {
        engine_free(e);
        return NULL;
    }
    return e;
}

static engine *open_engine(int cache_on, size_t cache_limit, size_t n_ctx)
{
    engine_opts o;
    memset(&o, 0, sizeof o);
    o.n_ctx = n_ctx;
    o.threads = 1;
    o.keep_alive_ms = -1;
    o.cache_on = cache_on;
    o.cache_limit = cache_limit;
    return open_opts(&o);
}

/* ---- a sink that records ------------------------------------------------ */

#define REC_MAX 1024

typedef struct {
    int32_t toks[REC_MAX];
    size_t n;
    char sent[8192];           /* the text released, joined */
    size_t sent_len;
    char log[8192];            /* per token: its released text then '|' */
    size_t cancel_after;       /* cancelled() says 1 once n >= this (0: never) */
    size_t refuse_at;          /* on_token returns 1 at this token (1-based; 0: never) */
    size_t n_stop_now;         /* tokens that came with stop_now set */
    size_t stop_now_at;        /* the last of them (1-based) */
    size_t bad_counts;         /* tokens whose so_far->n_decoded was not the count so far */
} rec;

static int rec_token(void *ud, const engine_token *t, int stop_now, const engine_result *so_far)
{
    rec *r = ud;
    if (r->n < REC_MAX) r->toks[r->n] = t->tok;
    r->n++;
    if (stop_now) {
        r->n_stop_now++;
        r->stop_now_at = r->n;
    }
    if (r->sent_len + t->text_len < sizeof r->sent) {
        memcpy(r->sent + r->sent_len, t->text, t->text_len);
        r->sent_len += t->text_len;
    }
    size_t o = strlen(r->log);
    snprintf(r->log + o, sizeof r->log - o, "%.*s|", (int)t->text_len, t->text);
    if (so_far->n_decoded != r->n) r->bad_counts++;   /* the counts so far reach the sink */
    return r->refuse_at && r->n == r->refuse_at;
}

static int rec_cancelled(void *ud)
{
    rec *r = ud;
    return r->cancel_after && r->n >= r->cancel_after;
}

static int rec_always(void *ud)
{
    (void)ud;
    return 1;
}

static void rec_init(rec *r)
{
    memset(r, 0, sizeof *r);
}

/* Tokens of text as llama-server tokenizes a prompt (BOS added). */
static size_t tokens(engine_model *m, const char *text, int32_t **ids)
{
    size_t n = 0;
    char err[256];
    *ids = NULL;
    if (engine_tokenize(m, text, strlen(text), ids, &n, err, sizeof err) != 0) return 0;
    return n;
}

/* One greedy completion of prompt[0..n) into *r and *res (freed by the
 * caller); rc of engine_complete. */
static int run(engine *e, engine_model *m, const int32_t *prompt, size_t n, int32_t n_predict, int cache_prompt,
               rec *r, engine_result *res)
{
    engine_request rq;
    engine_error er;
    engine_sink sink = {rec_token, rec_cancelled, r, NULL};
    engine_request_init(&rq);
    rq.prompt = prompt;
    rq.n_prompt = n;
    rq.greedy = 1;
    rq.n_predict = n_predict;
    rq.cache_prompt = cache_prompt;
    int rc = engine_complete(e, m, &rq, &sink, res, &er);
    if (rc != 0) fprintf(stderr, "engine_complete: %s\n", er.msg);
    engine_request_free(&rq);
    return rc;
}

static size_t lcp(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* A completion's tokens as the sink saw them, against want[0..n). */
static int same_tokens(const rec *r, const int32_t *want, size_t n)
{
    return r->n == n && memcmp(r->toks, want, n * sizeof *want) == 0;
}

#define P_LILY "Once upon a time, there was a little girl named Lily."
#define P_TIM "Once upon a time, there was a little boy named Tim."
#define P_CAT "The cat sat on the mat and the dog ran to the big tree."

/* stories260K's greedy answer to P_LILY, as llama-server b11669 gives it
 * (bankml generate is token-identical on its oracle):
 * " She loved to play outside in the park. One day, she saw a big, red
 * ball. She wanted to play with it, but it was" */
static const int32_t LILY_GREEDY[] = {338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295,
                                      433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388};

/* Acquires entry 0 of a new engine (of o, or of the three options when o
 * is NULL); NULL (and a failed check) when either fails. */
static engine_model *load_o(engine **e, const engine_opts *o, int cache_on, size_t cache_limit, size_t n_ctx)
{
    engine_error er;
    *e = o ? open_opts(o) : open_engine(cache_on, cache_limit, n_ctx);
    CHECK(*e != NULL);
    if (!*e) return NULL;
    engine_model *m = engine_acquire(*e, 0, NULL, &er);
    if (!m) {
        test_fail(__FILE__, __LINE__, "engine_acquire: %s", er.msg);
        engine_free(*e);
        *e = NULL;
    }
    return m;
}

static engine_model *load(engine **e, int cache_on, size_t cache_limit, size_t n_ctx)
{
    return load_o(e, NULL, cache_on, cache_limit, n_ctx);
}

static void unload(engine *e)
{
    engine_release(e, ENGINE_KEEP_DEFAULT);
    engine_free(e);
}

/* ---- the prompt-cache reuse rule in a real slot ------------------------- */

TEST(engine_slot_reuses_the_common_prefix)
{
    NEED_MODEL();
    engine *e;
    engine_model *m = load(&e, 0, 0, 0);
    if (!m) return;
    int32_t *p1, *p2;
    size_t n1 = tokens(m, P_LILY, &p1), n2 = tokens(m, P_TIM, &p2);
    CHECK_INT(n1, 16);
    CHECK_INT(n2, 16);
    rec r;
    engine_result res;

    rec_init(&r);
    CHECK_INT(run(e, m, p1, n1, 8, 1, &r, &res), 0);
    CHECK_INT(res.n_cached, 0);
    CHECK_INT(res.n_processed, 16);
    CHECK_INT(res.n_decoded, 8);
    CHECK(same_tokens(&r, LILY_GREEDY, 8));
    CHECK_INT(engine_model_n_slot(m), 16 + 7);      /* the last token drawn is not decoded */
    engine_result_free(&res);

    /* "Once upon a time, there was a" is shared */
    CHECK_INT(lcp(p1, n1, p2, n2), 10);
    rec_init(&r);
    CHECK_INT(run(e, m, p2, n2, 8, 1, &r, &res), 0);
    CHECK_INT(res.n_cached, 10);
    CHECK_INT(res.n_processed, 16 - 10);
    int32_t tim[8];
    memcpy(tim, r.toks, sizeof tim);
    CHECK_INT(r.n, 8);
    engine_result_free(&res);

    /* the whole prompt cached: one token is evaluated again */
    rec_init(&r);
    CHECK_INT(run(e, m, p2, n2, 8, 1, &r, &res), 0);
    CHECK_INT(res.n_cached, 15);
    CHECK_INT(res.n_processed, 1);
    CHECK(same_tokens(&r, tim, 8));
    engine_result_free(&res);

    /* cache_prompt off: nothing kept, the same answer */
    rec_init(&r);
    CHECK_INT(run(e, m, p2, n2, 8, 0, &r, &res), 0);
    CHECK_INT(res.n_cached, 0);
    CHECK_INT(res.n_processed, 16);
    CHECK(same_tokens(&r, tim, 8));
    engine_result_free(&res);

    /* and back to the first prompt over the second's slot: 10 again */
    rec_init(&r);
    CHECK_INT(run(e, m, p1, n1, 8, 1, &r, &res), 0);
    CHECK_INT(res.n_cached, 10);
    CHECK(same_tokens(&r, LILY_GREEDY, 8));
    engine_result_free(&res);

    free(p1);
    free(p2);
    unload(e);
}

/* ---- the host prompt cache (--cache-ram) -------------------------------- */

/* llama_state_seq_get_size of n cells of stories260K (5 layers, K and V
 * rows of 32 f16): what the cache's byte limit counts. */
static size_t state_size(size_t n) { return 4 + 4 + n * 12 + 8 + 5 * 2 * (12 + n * 32 * 2); }

/* A (P_LILY), B (P_CAT), A again, each with 8 tokens: the n_cached of each
 * and whether A's two answers agree. */
static void abba(int cache_on, size_t limit, size_t cached[3], int *same)
{
    engine *e;
    engine_model *m = load(&e, cache_on, limit, 0);
    cached[0] = cached[1] = cached[2] = 999;
    *same = 0;
    if (!m) return;
    int32_t *a, *b;
    size_t na = tokens(m, P_LILY, &a), nb = tokens(m, P_CAT, &b);
    rec r;
    engine_result res;
    const int32_t *ps[3] = {a, b, a};
    size_t ns[3] = {na, nb, na};
    for (int i = 0; i < 3; i++) {
        rec_init(&r);
        CHECK_INT(run(e, m, ps[i], ns[i], 8, 1, &r, &res), 0);
        cached[i] = res.n_cached;
        if (i == 2) *same = same_tokens(&r, LILY_GREEDY, 8);
        engine_result_free(&res);
    }
    free(a);
    free(b);
    unload(e);
}

TEST(engine_host_cache_resumes_a_conversation)
{
    NEED_MODEL();
    size_t c[3];
    int same;
    engine *e;
    engine_model *m = load(&e, 0, 0, 0);
    if (!m) return;
    int32_t *b;
    CHECK_INT(tokens(m, P_CAT, &b), 23);
    CHECK_INT(b[0], 1);                 /* only BOS in common with A: 1/23 and 1/16 <= 0.1 similar */
    CHECK(b[1] != 403);
    free(b);
    unload(e);

    /* no host cache: A again keeps only B's BOS */
    abba(0, 0, c, &same);
    CHECK_INT(c[0], 0);
    CHECK_INT(c[1], 1);
    CHECK_INT(c[2], 1);
    CHECK_INT(same, 1);

    /* with it: B saves A's 23 cells; A again restores them and keeps all
     * of its prompt but the last token */
    abba(1, 0, c, &same);
    CHECK_INT(c[0], 0);
    CHECK_INT(c[1], 1);
    CHECK_INT(c[2], 15);
    CHECK_INT(same, 1);

    /* a limit that holds both states exactly */
    abba(1, state_size(23) + state_size(30), c, &same);
    CHECK_INT(c[2], 15);
    CHECK_INT(same, 1);
    /* one byte less: saving B's 30 cells drops A's, the oldest */
    abba(1, state_size(23) + state_size(30) - 1, c, &same);
    CHECK_INT(c[2], 1);
    CHECK_INT(same, 1);
    /* A's state alone fits: B's does not, so B is not saved and evicts
     * nothing; A is still there */
    abba(1, state_size(23), c, &same);
    CHECK_INT(c[2], 15);
    /* a limit no state fits in keeps nothing */
    abba(1, state_size(23) - 1, c, &same);
    CHECK_INT(c[2], 1);
    abba(1, 1, c, &same);
    CHECK_INT(c[2], 1);
    CHECK_INT(same, 1);
}

/* --slot-prompt-similarity 0.1: a slot that keeps all but one of its 3
 * cells but covers only 2/nT <= 0.1 of a long prompt is saved all the
 * same, and a later prompt that continues the saved cells gets them back. */
TEST(engine_host_cache_saves_a_dissimilar_slot)
{
    NEED_MODEL();
    engine *e;
    engine_model *m = load(&e, 1, 0, 0);
    if (!m) return;
    int32_t *s, *t, *q;
    size_t ns = tokens(m, "Once", &s);
    size_t nt = tokens(m, "Once there was a big dog who liked to run and play in the park with his friend Tom.", &t);
    size_t nq = tokens(m, P_LILY, &q);
    rec r;
    engine_result res;
    CHECK_INT(ns, 2);
    rec_init(&r);
    CHECK_INT(run(e, m, s, ns, 2, 1, &r, &res), 0);     /* the slot: BOS "Once" " upon" */
    CHECK_INT(r.toks[0], q[2]);
    CHECK_INT(engine_model_n_slot(m), 3);
    engine_result_free(&res);
    /* T shares 2 of the slot's 3 cells (f_keep 0.67) and 2/nT of itself */
    CHECK(nt >= 20 && nt < 40 && t[1] == s[1] && t[2] != q[2]);
    rec_init(&r);
    CHECK_INT(run(e, m, t, nt, 4, 1, &r, &res), 0);
    CHECK_INT(res.n_cached, 2);
    engine_result_free(&res);
    /* Q = BOS "Once" " upon" ...: 2/16 of it in the slot, which would keep
     * 2 of its cells: saved, and the 3 cells saved above come back */
    rec_init(&r);
    CHECK_INT(run(e, m, q, nq, 8, 1, &r, &res), 0);
    CHECK_INT(res.n_cached, 3);
    CHECK(same_tokens(&r, LILY_GREEDY, 8));
    engine_result_free(&res);
    free(s);
    free(t);
    free(q);
    unload(e);
}

/* Prompts texts[0..n) in turn, 8 tokens each, in one engine: each
 * n_cached, and whether the last answer is LILY_GREEDY. */
static void conversations(int cache_on, const char *const *texts, size_t n, size_t *cached, int *lily)
{
    engine *e;
    engine_model *m = load(&e, cache_on, 0, 0);
    *lily = 0;
    for (size_t i = 0; i < n; i++) cached[i] = 999;
    if (!m) return;
    for (size_t i = 0; i < n; i++) {
        int32_t *p;
        size_t np = tokens(m, texts[i], &p);
        rec r;
        engine_result res;
        rec_init(&r);
        CHECK_INT(run(e, m, p, np, 8, 1, &r, &res), 0);
        cached[i] = res.n_cached;
        if (i == n - 1) *lily = same_tokens(&r, LILY_GREEDY, 8);
        engine_result_free(&res);
        free(p);
    }
    unload(e);
}

/* A slot similar to the prompt (10/16 > 0.1) but keeping less than half of
 * itself (10/23) is saved, so Lily's conversation comes back after Tim's. */
TEST(engine_host_cache_saves_a_slot_that_keeps_under_half)
{
    NEED_MODEL();
    const char *lily_tim_lily[] = {P_LILY, P_TIM, P_LILY};
    size_t c[3];
    int lily;
    conversations(1, lily_tim_lily, 3, c, &lily);
    CHECK_INT(c[0], 0);
    CHECK_INT(c[1], 10);
    CHECK_INT(c[2], 15);
    CHECK_INT(lily, 1);
    conversations(0, lily_tim_lily, 3, c, &lily);
    CHECK_INT(c[2], 10);
    CHECK_INT(lily, 1);
}

#define P_MAX "Once upon a time, there was a big dog named Max. Max liked to run in the park and play with " \
              "his red ball every day. One day, Max saw a cat."

/* A saved prompt that would keep less than a quarter of itself is not
 * restored, even when it serves the prompt better than the slot (Cat's
 * cells share only BOS with Lily; Max's share 9 of 60). */
TEST(engine_host_cache_skips_an_entry_under_a_quarter)
{
    NEED_MODEL();
    engine *e;
    engine_model *m = load(&e, 0, 0, 0);
    if (!m) return;
    int32_t *x, *l;
    size_t nx = tokens(m, P_MAX, &x), nl = tokens(m, P_LILY, &l);
    CHECK_INT(lcp(x, nx, l, nl), 9);
    CHECK_INT(nx + 7, 60);                  /* its cells; 9/60 < 0.25 */
    free(x);
    free(l);
    unload(e);
    const char *max_cat_lily[] = {P_MAX, P_CAT, P_LILY};
    size_t c[3];
    int lily;
    conversations(1, max_cat_lily, 3, c, &lily);
    CHECK_INT(c[1], 1);
    CHECK_INT(c[2], 1);
    CHECK_INT(lily, 1);
}

TEST(engine_select_runs_before_the_slot_is_used)
{
    NEED_MODEL();
    /* engine_select by the caller (rq.selected) is the same as inside */
    engine *e;
    engine_model *m = load(&e, 1, 0, 0);
    if (!m) return;
    int32_t *a, *b;
    size_t na = tokens(m, P_LILY, &a), nb = tokens(m, P_CAT, &b);
    rec r;
    engine_result res;
    engine_request rq;
    engine_error er;
    engine_sink sink = {rec_token, NULL, &r, NULL};
    rec_init(&r);
    CHECK_INT(run(e, m, a, na, 8, 1, &r, &res), 0);
    engine_result_free(&res);
    rec_init(&r);
    CHECK_INT(run(e, m, b, nb, 8, 1, &r, &res), 0);
    engine_result_free(&res);
    CHECK_INT(engine_model_n_slot(m), 30);
    engine_select(e, m, a, na, -1);             /* B saved, A's 23 cells back */
    CHECK_INT(engine_model_n_slot(m), 23);
    engine_request_init(&rq);
    rq.prompt = a;
    rq.n_prompt = na;
    rq.greedy = 1;
    rq.n_predict = 8;
    rq.selected = 1;
    rec_init(&r);
    CHECK_INT(engine_complete(e, m, &rq, &sink, &res, &er), 0);
    CHECK_INT(res.n_cached, 15);
    CHECK(same_tokens(&r, LILY_GREEDY, 8));
    engine_result_free(&res);
    engine_request_free(&rq);
    free(a);
    free(b);
    unload(e);
}

/* ---- stop strings, the budget, the context ------------------------------ */

/* A greedy completion of P_LILY with stops[0..n_stops), n_predict 40. */
static int run_stops(engine *e, engine_model *m, const char *const *stops, size_t n_stops, rec *r,
                     engine_result *res)
{
    int32_t *p;
    size_t n = tokens(m, P_LILY, &p);
    engine_request rq;
    engine_error er;
    engine_sink sink = {rec_token, rec_cancelled, r, NULL};
    engine_request_init(&rq);
    rq.prompt = p;
    rq.n_prompt = n;
    rq.greedy = 1;
    rq.n_predict = 40;
    for (size_t i = 0; i < n_stops; i++) {
        rq.stops[i] = stops[i];
        rq.stop_lens[i] = strlen(stops[i]);
    }
    rq.n_stops = n_stops;
    rec_init(r);
    int rc = engine_complete(e, m, &rq, &sink, res, &er);
    engine_request_free(&rq);
    free(p);
    return rc;
}

TEST(engine_stop_word_ends_the_answer_before_it)
{
    NEED_MODEL();
    engine *e;
    engine_model *m = load(&e, 0, 0, 0);
    if (!m) return;
    rec r;
    engine_result res;
    /* " big, red" spans the tokens " big" "," " r" "ed": each is held back
     * until "ed" completes the word; the space before it goes out last */
    const char *stops[] = {"zebra", "big, red"};
    CHECK_INT(run_stops(e, m, stops, 2, &r, &res), 0);
    CHECK_INT(res.stop, ENGINE_STOP_WORD);
    CHECK_INT(res.stop_word, 1);
    CHECK_STR(engine_finish(&res), "stop");
    CHECK_INT(res.truncated, 0);
    CHECK_INT(res.gone, 0);
    CHECK_INT(res.n_decoded, 26);
    CHECK_INT(r.n, 26);
    CHECK_INT(r.n_stop_now, 1);                /* the last token comes with stop_now */
    CHECK_INT(r.stop_now_at, 26);
    CHECK_INT(r.bad_counts, 0);
    const char *want = " She loved to play outside in the park. One day, she saw a ";
    CHECK_INT(res.text.len, strlen(want));
    CHECK(res.text.len == strlen(want) && memcmp(res.text.p, want, res.text.len) == 0);
    CHECK_INT(res.n_sent, strlen(want));
    CHECK_INT(r.sent_len, strlen(want));
    CHECK(memcmp(r.sent, want, strlen(want)) == 0);
    CHECK_STR(r.log, " She| lo|ved| to| play| |out|s|id|e| in| the| p|ar|k|.| One| day|,| she| saw| a|||| |");
    engine_result_free(&res);

    /* "big, blue" is held through " big" and ",", then " r" releases all three */
    const char *blue[] = {"big, blue"};
    CHECK_INT(run_stops(e, m, blue, 1, &r, &res), 0);
    CHECK_INT(res.stop, ENGINE_STOP_LIMIT);
    CHECK_INT(res.n_decoded, 40);
    CHECK_INT(r.n_stop_now, 0);                /* the budget is decided after the token is sent */
    /* (and " b" waits for "all": "b" could begin the word) */
    CHECK_STR(r.log, " She| lo|ved| to| play| |out|s|id|e| in| the| p|ar|k|.| One| day|,| she| saw| a||| big, r|ed||"
                     " ball|.| She| want|ed| to| play| with| it|,| but| it| was|");
    CHECK_INT(res.n_sent, res.text.len);
    CHECK(r.sent_len == res.text.len && memcmp(r.sent, res.text.p, r.sent_len) == 0);
    engine_result_free(&res);

    /* a word in one token's piece ends at that token */
    const char *park[] = {" park", "."};
    CHECK_INT(run_stops(e, m, park, 2, &r, &res), 0);
    CHECK_INT(res.stop, ENGINE_STOP_WORD);
    CHECK_INT(res.stop_word, 0);
    CHECK_STR(r.log, " She| lo|ved| to| play|| out|s|id|e| in| the||||");
    CHECK_INT(res.text.len, strlen(" She loved to play outside in the"));
    engine_result_free(&res);
    unload(e);
}

TEST(engine_budget_and_context_end_with_length)
{
    NEED_MODEL();
    engine *e;
    engine_model *m = load(&e, 0, 0, 200);
    if (!m) return;
    CHECK_INT(engine_model_n_ctx(m), 256);           /* padded to 256 as llama.cpp pads */
    CHECK_INT(engine_n_ctx_opt(e), 200);
    int32_t *p;
    size_t n = tokens(m, P_LILY, &p);
    rec r;
    engine_result res;
    rec_init(&r);
    CHECK_INT(run(e, m, p, n, 5, 1, &r, &res), 0);
    CHECK_INT(res.stop, ENGINE_STOP_LIMIT);
    CHECK_STR(engine_finish(&res), "length");
    CHECK_INT(res.truncated, 0);
    CHECK_INT(res.n_decoded, 5);
    CHECK(same_tokens(&r, LILY_GREEDY, 5));
    CHECK_INT(res.text.len, strlen(" She loved to play"));
    engine_result_free(&res);

    /* no budget: the answer runs until the next token would not fit */
    rec_init(&r);
    CHECK_INT(run(e, m, p, n, -1, 0, &r, &res), 0);
    CHECK_INT(res.stop, ENGINE_STOP_LIMIT);
    CHECK_INT(res.truncated, 1);
    CHECK_STR(engine_finish(&res), "length");
    CHECK_INT(res.n_decoded, 256 - 16);                /* the prompt's 16 + 240 = n_ctx */
    CHECK_INT(r.n, 240);
    CHECK_INT(engine_model_n_slot(m), 255);            /* the last token drawn is not decoded */
    CHECK(memcmp(r.toks, LILY_GREEDY, sizeof LILY_GREEDY) == 0);
    engine_result_free(&res);
    free(p);
    unload(e);
}

/* ---- cancellation -------------------------------------------------------- */

/* P_LILY's first 8 greedy tokens with the sink stopping after k: by
 * cancelled (how = 0) or by on_token's return (how = 1). Then the slot is
 * checked by a completion of P_LILY + the k tokens drawn, which must keep
 * all but the last drawn (it was never decoded) and go on as the
 * uninterrupted answer does. */
static void cancel_case(int how, size_t k)
{
    engine *e;
    engine_model *m = load(&e, 0, 0, 0);
    if (!m) return;
    int32_t *p;
    size_t n = tokens(m, P_LILY, &p);
    rec r;
    engine_result res;
    rec_init(&r);
    if (how == 0) r.cancel_after = k;
    else r.refuse_at = k;
    CHECK_INT(run(e, m, p, n, 8, 1, &r, &res), 0);
    CHECK_INT(res.gone, 1);
    CHECK_INT(res.stop, ENGINE_STOP_NONE);
    CHECK_INT(res.n_decoded, k);
    CHECK_INT(r.n, k);
    CHECK(same_tokens(&r, LILY_GREEDY, k));
    CHECK_INT(engine_model_n_slot(m), n + k - 1);
    engine_result_free(&res);

    int32_t more[64];
    memcpy(more, p, n * sizeof *p);
    memcpy(more + n, LILY_GREEDY, k * sizeof *more);
    rec_init(&r);
    CHECK_INT(run(e, m, more, n + k, (int32_t)(8 - k), 1, &r, &res), 0);
    CHECK_INT(res.gone, 0);
    CHECK_INT(res.n_cached, n + k - 1);
    CHECK_INT(res.n_processed, 1);
    CHECK(same_tokens(&r, LILY_GREEDY + k, 8 - k));
    engine_result_free(&res);
    free(p);
    unload(e);
}

TEST(engine_cancelled_sink_stops_and_keeps_the_slot)
{
    NEED_MODEL();
    cancel_case(0, 3);
    cancel_case(0, 1);
}

TEST(engine_on_token_nonzero_stops_and_keeps_the_slot)
{
    NEED_MODEL();
    cancel_case(1, 3);
    cancel_case(1, 1);
}

/* A prompt of more than one decode call (-b 512): cancelled between them,
 * the slot keeps the first 512 and the next request reuses them. (With
 * -c 1024 and the default -b 2048 the batch is min(-c, -b) = 1024: the
 * whole prompt is one call, as in llama-server.) */
TEST(engine_cancel_during_the_prompt_keeps_what_was_computed)
{
    NEED_MODEL();
    engine *e;
    engine_opts o;
    memset(&o, 0, sizeof o);
    o.n_ctx = 1024;
    o.n_batch = 512;
    o.threads = 1;
    o.keep_alive_ms = -1;
    engine_model *m = load_o(&e, &o, 0, 0, 0);
    if (!m) return;
    char text[8192] = "";
    for (int i = 0; i < 40; i++) strcat(text, P_LILY " ");
    int32_t *p;
    size_t n = tokens(m, text, &p);
    CHECK(n > 512 && n < 1000);
    rec r;
    engine_result res;
    engine_request rq;
    engine_error er;
    /* cancelled at once: it is polled first after the first micro-batch */
    engine_sink sink = {rec_token, rec_always, &r, NULL};
    engine_request_init(&rq);
    rq.prompt = p;
    rq.n_prompt = n;
    rq.greedy = 1;
    rq.n_predict = 4;
    rec_init(&r);
    CHECK_INT(engine_complete(e, m, &rq, &sink, &res, &er), 0);
    CHECK_INT(res.gone, 1);
    CHECK_INT(res.n_decoded, 0);
    CHECK_INT(r.n, 0);
    CHECK_INT(engine_model_n_slot(m), 512);
    engine_result_free(&res);
    engine_request_free(&rq);

    rec_init(&r);
    CHECK_INT(run(e, m, p, n, 4, 1, &r, &res), 0);
    CHECK_INT(res.gone, 0);
    CHECK_INT(res.n_cached, 512);
    CHECK_INT(res.n_processed, n - 512);
    CHECK_INT(engine_model_n_slot(m), n + 3);
    int32_t got[4];
    memcpy(got, r.toks, sizeof got);
    engine_result_free(&res);
    rec_init(&r);
    CHECK_INT(run(e, m, p, n, 4, 0, &r, &res), 0);     /* from nothing: the same answer */
    CHECK_INT(res.n_cached, 0);
    CHECK(same_tokens(&r, got, 4));
    engine_result_free(&res);
    free(p);
    unload(e);
}

/* ---- the registry and its errors ------------------------------------------ */

TEST(engine_status_maps_each_kind)
{
    CHECK_INT(engine_status(ENGINE_OK), 200);
    CHECK_INT(engine_status(ENGINE_BAD_INPUT), 400);
    CHECK_INT(engine_status(ENGINE_NOT_FOUND), 404);
    CHECK_INT(engine_status(ENGINE_UNAVAILABLE), 503);
    CHECK_INT(engine_status(ENGINE_INTERNAL), 500);
}

TEST(engine_find_by_name_file_and_path)
{
    engine_opts o;
    engine_error er;
    engine_entry en;
    memset(&o, 0, sizeof o);
    o.threads = 1;
    engine *e = engine_new(&o, &er);
    CHECK(e != NULL);
    if (!e) return;
    CHECK_INT(engine_add(e, "Stories260K.gguf", "/models/Stories260K.gguf", "/models/a.FORK.json", 1), 0);
    CHECK_INT(engine_add(e, "sub/Other-Model.GGUF", "/x/Other-Model.GGUF", "/x/b.FORK.json", 0), 0);
    /* a name already there is kept as it is */
    CHECK_INT(engine_add(e, "STORIES260K.gguf", "/elsewhere/STORIES260K.gguf", "/elsewhere/c.FORK.json", 0), 0);
    CHECK_INT(engine_n_entries(e), 2);
    CHECK_INT(engine_entry_get(e, 0, &en), 0);
    CHECK_STR(en.name, "stories260k");
    CHECK_STR(en.file, "Stories260K.gguf");
    CHECK_STR(en.path, "/models/Stories260K.gguf");
    CHECK_STR(en.fork, "/models/a.FORK.json");
    CHECK_INT(en.present, 1);
    CHECK_INT(engine_entry_get(e, 1, &en), 0);
    CHECK_STR(en.name, "other-model");
    CHECK_STR(en.file, "Other-Model.GGUF");
    CHECK_INT(en.present, 0);
    CHECK_INT(engine_entry_get(e, 2, &en), -1);

    CHECK_INT(engine_find(e, "stories260k"), 0);
    CHECK_INT(engine_find(e, "STORIES260K"), 0);
    CHECK_INT(engine_find(e, "stories260k:latest"), 0);
    CHECK_INT(engine_find(e, "Stories260K:LATEST"), 0);
    CHECK_INT(engine_find(e, "stories260k.gguf"), 0);
    CHECK_INT(engine_find(e, "/models/Stories260K.gguf"), 0);
    CHECK_INT(engine_find(e, "other-model:latest"), 1);
    CHECK_INT(engine_find(e, "other-model.gguf"), 1);
    CHECK_INT(engine_find(e, "/x/Other-Model.GGUF"), 1);
    CHECK_INT(engine_find(e, "/X/other-model.gguf"), -1);     /* a path is compared as given */
    CHECK_INT(engine_find(e, "stories"), -1);
    CHECK_INT(engine_find(e, "stories260k:v2"), -1);
    CHECK_INT(engine_find(e, "stories260k.gguf:latest"), -1);
    CHECK_INT(engine_find(e, "/elsewhere/STORIES260K.gguf"), -1);
    CHECK_INT(engine_find(e, NULL), 0);                        /* the default */
    CHECK_INT(engine_find(e, ""), 0);
    engine_set_default(e, 1);
    CHECK_INT(engine_default(e), 1);
    CHECK_INT(engine_find(e, ""), 1);
    engine_set_default(e, 7);                                  /* out of range: kept */
    CHECK_INT(engine_default(e), 1);
    engine_free(e);
}

TEST(engine_find_without_the_weight_type_suffix)
{
    engine_opts o;
    engine_error er;
    memset(&o, 0, sizeof o);
    o.threads = 1;
    engine *e = engine_new(&o, &er);
    CHECK(e != NULL);
    if (!e) return;
    CHECK_INT(engine_add(e, "Bonsai-8B-Q1_0.gguf", "/m/Bonsai-8B-Q1_0.gguf", "/m/a.FORK.json", 1), 0);
    CHECK_INT(engine_add(e, "qwen3-e128-q2_0_g64.gguf", "/m/qwen3-e128-q2_0_g64.gguf", "/m/a.FORK.json", 1), 0);
    CHECK_INT(engine_add(e, "tiny-f16.gguf", "/m/tiny-f16.gguf", "/m/a.FORK.json", 1), 0);
    CHECK_INT(engine_add(e, "tiny-Q4_K_M.gguf", "/m/tiny-Q4_K_M.gguf", "/m/a.FORK.json", 1), 0);
    CHECK_INT(engine_add(e, "plain.gguf", "/m/plain.gguf", "/m/a.FORK.json", 1), 0);
    CHECK_INT(engine_find(e, "bonsai-8b"), 0);
    CHECK_INT(engine_find(e, "Bonsai-8B:latest"), 0);
    CHECK_INT(engine_find(e, "qwen3-e128"), 1);            /* -q2_0_g64 whole, not -q2_0 */
    CHECK_INT(engine_find(e, "qwen3-e128-q2_0"), -1);
    CHECK_INT(engine_find(e, "tiny"), -1);                 /* two pins have that base */
    CHECK_INT(engine_find(e, "tiny-q4_k_m"), 3);
    CHECK_INT(engine_find(e, "plain"), 4);                 /* its own name */
    CHECK_INT(engine_find(e, "pla"), -1);
    CHECK_INT(engine_find(e, ":latest"), -1);
    CHECK_INT((int)engine_name_base("x-Q8_0", 6), 1);
    CHECK_INT((int)engine_name_base("-q8_0", 5), 5);        /* nothing before the suffix: no base */
    CHECK_INT((int)engine_name_base("model", 5), 5);
    engine_free(e);
}

static int write_text(const char *dir, const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static int link_model(const char *dir, const char *name)
{
    char p[256], target[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!realpath(model_path, target)) return -1;
    unlink(p);
    return symlink(target, p);
}

/* engine_acquire in a thread, so that a lock left held fails the test
 * instead of hanging it. */
typedef struct {
    engine *e;
    size_t idx;
    int loaded;
    engine_error er;
    engine_model *m;
} acq;

static void *acq_main(void *arg)
{
    acq *a = arg;
    a->m = engine_acquire(a->e, a->idx, &a->loaded, &a->er);
    return NULL;
}

/* 0 with *a filled, -1 when engine_acquire did not return within 10 s
 * (the engine is then unusable; the caller must not free it). */
static int acquire_timed(engine *e, size_t idx, acq *a)
{
    pthread_t t;
    struct timespec ts;
    memset(a, 0, sizeof *a);
    a->e = e;
    a->idx = idx;
    a->loaded = -1;
    if (pthread_create(&t, NULL, acq_main, a) != 0) return -1;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    if (pthread_timedjoin_np(t, NULL, &ts) != 0) {
        pthread_detach(t);
        test_fail(__FILE__, __LINE__, "engine_acquire(%zu) did not return: the lock was left held", idx);
        return -1;
    }
    return 0;
}

TEST(engine_acquire_errors_have_their_kinds)
{
    NEED_MODEL();
    char sha[65], err[512], want[1024];
    CHECK_INT(pin_check(model_path, fork_path, sha, err, sizeof err), 0);
    /* the directory: stories260K pinned, wrong.gguf pinned to another
     * digest, absent.gguf pinned but nowhere, unpinned.gguf not pinned */
    CHECK_INT(link_model(tmpdir, "stories260K.gguf"), 0);
    CHECK_INT(link_model(tmpdir, "wrong.gguf"), 0);
    CHECK_INT(link_model(tmpdir, "unpinned.gguf"), 0);
    CHECK_INT(write_text(tmpdir, "wrong.FORK.json",
                         "{\"files\": [{\"path\": \"wrong.gguf\", \"sha256\": "
                         "\"0000000000000000000000000000000000000000000000000000000000000000\"}]}"), 0);
    CHECK_INT(write_text(tmpdir, "other.FORK.json",
                         "{\"files\": [{\"path\": \"sub/absent.gguf\", \"bytes\": 1, \"sha256\": "
                         "\"abababababababababababababababababababababababababababababababab\"},"
                         " {\"path\": \"README.md\"}]}"), 0);
    engine_opts o;
    engine_error er;
    engine_entry en;
    memset(&o, 0, sizeof o);
    o.threads = 1;
    o.keep_alive_ms = -1;
    engine *e = engine_new(&o, &er);
    CHECK(e != NULL);
    if (!e) return;
    engine_add_dir(e, tmpdir, NULL);       /* other, stories260K, wrong: in name order */
    char up[256];
    snprintf(up, sizeof up, "%s/unpinned.gguf", tmpdir);
    CHECK_INT(engine_add(e, "unpinned.gguf", up, fork_path, 1), 0);
    CHECK_INT(engine_n_entries(e), 4);
    const char *names[] = {"absent", "stories260k", "wrong", "unpinned"};
    const int present[] = {0, 1, 1, 1};
    for (size_t i = 0; i < 4; i++) {
        CHECK_INT(engine_entry_get(e, i, &en), 0);
        CHECK_STR(en.name, names[i]);
        CHECK_INT(en.present, present[i]);
    }
    acq a;
    if (acquire_timed(e, 0, &a)) return;
    CHECK(a.m == NULL);
    CHECK_INT(a.er.kind, ENGINE_NOT_FOUND);
    CHECK_STR(a.er.msg, "absent.gguf is pinned but not on this machine");
    if (acquire_timed(e, 2, &a)) return;
    CHECK(a.m == NULL);
    CHECK_INT(a.er.kind, ENGINE_BAD_INPUT);
    snprintf(want, sizeof want, "refuse: wrong.gguf sha256 %s != pinned %.64s: refused", sha,
             "0000000000000000000000000000000000000000000000000000000000000000");
    CHECK_STR(a.er.msg, want);
    if (acquire_timed(e, 3, &a)) return;
    CHECK(a.m == NULL);
    CHECK_INT(a.er.kind, ENGINE_BAD_INPUT);
    snprintf(want, sizeof want, "refuse: unpinned.gguf has no sha256 record in FORK.json: unpinned, refused (if it "
             "is the file you mean to run, pin it: bankml pin %s --fork %s --write)", up, fork_path);
    CHECK_STR(a.er.msg, want);
    if (acquire_timed(e, 4, &a)) return;
    CHECK(a.m == NULL);
    CHECK_INT(a.er.kind, ENGINE_NOT_FOUND);

    /* the pinned one loads, once */
    if (acquire_timed(e, 1, &a)) return;
    CHECK(a.m != NULL);
    if (!a.m) {
        fprintf(stderr, "%s\n", a.er.msg);
        engine_free(e);
        return;
    }
    CHECK_INT(a.loaded, 1);
    CHECK_INT(engine_model_entry(a.m), 1);
    CHECK_STR(engine_model_sha256(a.m), sha);
    CHECK_INT(engine_model_n_vocab(a.m), 512);
    int64_t left = 0;
    CHECK_INT(engine_resident(e, &left, NULL), 1);
    engine_release(e, -1);
    engine_model *first = a.m;
    if (acquire_timed(e, 1, &a)) return;
    CHECK(a.m == first);
    CHECK_INT(a.loaded, 0);
    engine_release(e, 60000);
    engine_lock(e);
    CHECK_INT(engine_resident(e, &left, NULL), 1);
    CHECK(left > 59000 && left <= 60000);
    engine_unlock(e);
    engine_status_info *si = malloc(sizeof *si);
    if (si) {
        engine_status_get(e, si);
        CHECK_STR(si->last_sha, sha);
        CHECK_INT(si->resident, 1);
        CHECK(si->verified_json && strstr(si->verified_json, sha) != NULL);
        free(si->verified_json);
        free(si);
    }
    /* keep_alive 0 unloads at release */
    if (acquire_timed(e, 1, &a)) return;
    CHECK_INT(a.loaded, 0);
    engine_release(e, 0);
    engine_lock(e);
    CHECK_INT(engine_resident(e, NULL, NULL), -1);
    engine_unlock(e);
    engine_free(e);
}

/* ---- seeded sampling ------------------------------------------------------- */

static int run_sampled(engine *e, engine_model *m, const int32_t *p, size_t n, uint32_t seed, int cache_prompt,
                       rec *r, engine_result *res)
{
    engine_request rq;
    engine_error er;
    engine_sink sink = {rec_token, NULL, r, NULL};
    engine_request_init(&rq);
    rq.prompt = p;
    rq.n_prompt = n;
    rq.greedy = 0;
    rq.sp.seed = seed;
    rq.sp.n_probs = 2;
    rq.n_predict = 24;
    rq.cache_prompt = cache_prompt;
    rec_init(r);
    int rc = engine_complete(e, m, &rq, &sink, res, &er);
    if (rc != 0) fprintf(stderr, "engine_complete: %s\n", er.msg);
    engine_request_free(&rq);
    return rc;
}

TEST(engine_same_seed_same_tokens)
{
    NEED_MODEL();
    engine *e;
    engine_model *m = load(&e, 0, 0, 0);
    if (!m) return;
    int32_t *p;
    size_t n = tokens(m, P_LILY, &p);
    rec r;
    engine_result res;
    int32_t first[24];
    CHECK_INT(run_sampled(e, m, p, n, 42, 1, &r, &res), 0);
    CHECK_INT(r.n, 24);
    memcpy(first, r.toks, sizeof first);
    CHECK(memcmp(first, LILY_GREEDY, sizeof first) != 0);   /* temp 0.8: not the greedy answer */
    CHECK_INT(res.n_probs_out, 24);
    for (size_t i = 0; i < res.n_probs_out && i < 24; i++) {
        CHECK_INT(res.probs[i].tok, first[i]);
        CHECK_INT(res.probs[i].n_top, 2);
    }
    engine_result_free(&res);
    /* again, over the slot it left (15 cached) and from nothing */
    CHECK_INT(run_sampled(e, m, p, n, 42, 1, &r, &res), 0);
    CHECK_INT(res.n_cached, 15);
    CHECK(same_tokens(&r, first, 24));
    engine_result_free(&res);
    CHECK_INT(run_sampled(e, m, p, n, 42, 0, &r, &res), 0);
    CHECK_INT(res.n_cached, 0);
    CHECK(same_tokens(&r, first, 24));
    engine_result_free(&res);
    /* another seed draws another answer */
    CHECK_INT(run_sampled(e, m, p, n, 43, 1, &r, &res), 0);
    CHECK(!same_tokens(&r, first, 24));
    engine_result_free(&res);
    free(p);
    unload(e);
}

/* ---- reading without the engine lock (engine_peek) ----------------------- */

typedef struct {
    engine *e;
    int done;                  /* __atomic: the unload returned */
} unloader;

static void *unload_main(void *arg)
{
    unloader *u = arg;
    engine_error er;
    if (engine_acquire(u->e, 0, NULL, &er)) engine_release(u->e, 0);
    __atomic_store_n(&u->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* A reader gets the resident model while the engine lock is held (as a
 * generation holds it), tokenizes through it as the lock's holder does, and
 * sets the expiry; an unload waits until the reader lets it go. */
TEST(engine_peek_reads_without_the_lock_and_an_unload_waits_for_it)
{
    NEED_MODEL();
    engine *e;
    engine_model *m = load(&e, 0, 0, 0);   /* the engine lock is held from here */
    if (!m) return;
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int64_t left = 0;
    char err[256];
    const engine_model *p = engine_peek(e, 0, -1);
    CHECK(p == m);
    CHECK_INT(engine_tokenize(m, P_LILY, strlen(P_LILY), &a, &na, err, sizeof err), 0);
    if (p) CHECK_INT(engine_tokenize(p, P_LILY, strlen(P_LILY), &b, &nb, err, sizeof err), 0);
    CHECK_INT(nb, na);
    CHECK(na > 0 && b && !memcmp(a, b, na * sizeof *a));
    free(a);
    free(b);
    if (p) engine_unpeek(e, 60000);        /* keep-alive 60 s from now */
    CHECK_INT(engine_resident(e, &left, NULL), 0);
    CHECK(left > 59000 && left <= 60000);
    p = engine_peek(e, 0, -1);
    if (p) engine_unpeek(e, ENGINE_KEEP_SAME);   /* the expiry left as it was */
    CHECK_INT(engine_resident(e, &left, NULL), 0);
    CHECK(left > 59000 && left <= 60000);
    CHECK(engine_peek(e, 0, 0) == NULL);   /* keep_alive 0: an unload, engine_acquire's */
    CHECK(engine_peek(e, 1, -1) == NULL);  /* no such entry */
    engine_release(e, -1);
    p = engine_peek(e, 0, -1);
    CHECK(p == m);
    unloader u = {e, 0};
    pthread_t t;
    int started = pthread_create(&t, NULL, unload_main, &u) == 0;
    CHECK(started);
    usleep(200000);
    CHECK_INT(__atomic_load_n(&u.done, __ATOMIC_SEQ_CST), 0);   /* the unload waits for the reader */
    CHECK_INT(engine_resident(e, NULL, NULL), 0);
    if (p) engine_unpeek(e, ENGINE_KEEP_SAME);
    if (started) pthread_join(t, NULL);
    CHECK_INT(__atomic_load_n(&u.done, __ATOMIC_SEQ_CST), 1);
    CHECK_INT(engine_resident(e, NULL, NULL), -1);
    CHECK(engine_peek(e, 0, -1) == NULL);  /* not resident: loading it is engine_acquire's */
    engine_free(e);
}

/* ---- slots (-np) and batches (-b, -ub) ----------------------------------- */

static void slot_opts(engine_opts *o, size_t n_ctx, int np, size_t nb, size_t nub)
{
    memset(o, 0, sizeof *o);
    o->n_ctx = n_ctx;
    o->n_parallel = np;
    o->n_batch = nb;
    o->n_ubatch = nub;
    o->threads = 1;
    o->keep_alive_ms = -1;
    o->cache_on = 1;           /* llama-server's --cache-ram 8192: no limit reached here */
}

/* What engine_new refuses, each with its reason. */
TEST(engine_new_refuses_slots_it_does_not_reproduce)
{
    engine_opts o;
    engine_error er;
    struct {
        int np, kvu;
        size_t nb;
        float sps;
        const char *why;
    } bad[] = {{-1, 0, 0, 0, "-np auto"}, {2, 1, 0, 0, "--kv-unified with -np 2"}, {257, 0, 0, 0, "at most 256"},
               {1, 0, 70000, 0, "at most 65536"}, {2, 0, 0, 1.5f, "0 to 1"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        slot_opts(&o, 512, bad[i].np, bad[i].nb, 0);
        o.kv_unified = bad[i].kvu;
        o.slot_prompt_similarity = bad[i].sps;
        memset(&er, 0, sizeof er);
        engine *e = engine_new(&o, &er);
        CHECK(e == NULL);
        engine_free(e);
        CHECK_INT(er.kind, ENGINE_BAD_INPUT);
        if (!strstr(er.msg, bad[i].why)) test_fail(__FILE__, __LINE__, "reason %s lacks %s", er.msg, bad[i].why);
    }
    slot_opts(&o, 512, 1, 0, 0);
    o.kv_unified = 1;           /* one slot: one stream either way */
    engine *e = engine_new(&o, &er);
    CHECK(e != NULL);
    engine_free(e);
}

/* llama_context's sizes: -c rounded up to 256, split, each share rounded
 * up to 256 (b11669 logs n_ctx_slot = 256 for -c 512 -np 3). */
TEST(engine_slots_have_llama_servers_context)
{
    NEED_MODEL();
    struct {
        size_t c;
        int np;
        size_t want;
    } cases[] = {{512, 2, 256}, {512, 3, 256}, {1000, 2, 512}, {300, 1, 512}, {512, 0, 512}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        engine_opts o;
        engine *e;
        slot_opts(&o, cases[i].c, cases[i].np, 0, 0);
        engine_model *m = load_o(&e, &o, 0, 0, 0);
        if (!m) return;
        CHECK_INT(engine_model_n_ctx(m), cases[i].want);
        CHECK_INT(engine_model_n_slots(m), cases[i].np ? cases[i].np : 1);
        unload(e);
    }
}

/* One greedy /completion-like request for a slot: n_predict tokens of
 * text's prompt, id_slot as asked. Fills got[4] = {id_slot, cache_n,
 * prompt_n, tokens_cached}. */
static void run_slot(engine *e, engine_model *m, const char *text, int32_t n_predict, int32_t id_slot, size_t got[4])
{
    int32_t *p;
    size_t n = tokens(m, text, &p);
    engine_request rq;
    engine_result res;
    engine_error er;
    rec r;
    engine_sink sink = {rec_token, NULL, &r, NULL};
    engine_request_init(&rq);
    rq.prompt = p;
    rq.n_prompt = n;
    rq.greedy = 1;
    rq.n_predict = n_predict;
    rq.id_slot = id_slot;
    rec_init(&r);
    CHECK_INT(engine_complete(e, m, &rq, &sink, &res, &er), 0);
    got[0] = (size_t)res.id_slot;
    got[1] = res.n_cached;
    got[2] = res.n_processed;
    got[3] = engine_model_n_slot(m);
    CHECK_INT(engine_model_slot(m), res.id_slot);
    CHECK_INT(engine_model_slot_tokens(m, res.id_slot), got[3]);
    engine_result_free(&res);
    engine_request_free(&rq);
    free(p);
}

#define S_A "Once upon a time there was a little girl named Lily. She loved to play"
#define S_B "The dog ran to the park and saw a big red ball on the grass"

/* llama-server b11669 -c 512 -np 2 -b 32 on stories260K, /completion with
 * n_predict 8 and temperature 0, one request after another: id_slot,
 * cache_n, prompt_n, tokens_cached of each answer as it gave them. */
TEST(engine_slots_selected_as_llama_server_selects_them)
{
    NEED_MODEL();
    engine_opts o;
    engine *e;
    slot_opts(&o, 512, 2, 32, 0);
    engine_model *m = load_o(&e, &o, 0, 0, 0);
    if (!m) return;
    char x100[256] = "", x100y[sizeof x100 + 1];
    for (int i = 0; i < 100; i++) strcat(x100, "x ");
    snprintf(x100y, sizeof x100y, "%sy", x100);
    struct {
        const char *text;
        int32_t id_slot;
        size_t want[4];
    } seq[] = {
        {S_A, -1, {0, 0, 20, 27}},              /* both empty: the least recently used, the lowest id */
        {S_B, -1, {1, 0, 26, 33}},              /* BOS is 1/26 of B, under 0.10: LRU, the unused slot 1 */
        {S_A " outside", -1, {0, 24, 1, 32}},   /* by similarity */
        {S_B " and", -1, {1, 26, 1, 34}},
        {S_A, 0, {0, 19, 1, 27}},               /* asked; the whole prompt held: one token again */
        {S_A, 5, {1, 19, 1, 27}},               /* 5 % 2: slot 1; keeps 0 of itself: saved, A+ restored */
        {"Hello", -3, {1, 1, 3, 11}},           /* (size_t)-3 % 2 = 1 */
        {x100, -1, {0, 1, 201, 209}},           /* LRU: slot 0; 201 tokens in 7 decode calls of 32 */
        {x100y, -1, {0, 201, 1, 209}},
    };
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        size_t got[4];
        run_slot(e, m, seq[i].text, 8, seq[i].id_slot, got);
        for (int k = 0; k < 4; k++)
            if (got[k] != seq[i].want[k])
                test_fail(__FILE__, __LINE__, "request %zu: %s %zu, want %zu", i + 1,
                          (const char *[]){"id_slot", "cache_n", "prompt_n", "tokens_cached"}[k], got[k],
                          seq[i].want[k]);
    }
    engine_metrics met;
    engine_metrics_get(e, &met, 0);
    /* one call per 32 prompt tokens, then 7 steps (the 8th token is not decoded) */
    CHECK_U64(met.n_decode, 8 * (1 + 7) + (7 + 7));
    CHECK_U64(met.n_tokens_max, 209);
    unload(e);
}

/* -np 3 -b 32 -ub 128, n_predict 4: short prompts share BOS, more than
 * 10 % of them, so slot 0 takes them all (saving each to the host cache,
 * which gives "The sun was hot" back); a long prompt shares under 10 % and
 * goes to the least recently used: never-used slot 1 before slot 2. */
TEST(engine_slots_lru_prefers_the_never_used_lowest_id)
{
    NEED_MODEL();
    engine_opts o;
    engine *e;
    slot_opts(&o, 512, 3, 32, 128);
    engine_model *m = load_o(&e, &o, 0, 0, 0);
    if (!m) return;
    CHECK_INT(engine_model_n_ctx(m), 256);
    char x100[256] = "";
    for (int i = 0; i < 100; i++) strcat(x100, "x ");
    struct {
        const char *text;
        size_t want[3];
    } seq[] = {{"One day a cat", {0, 0, 6}}, {"The sun was hot", {0, 1, 6}}, {"Tom had a toy", {0, 1, 6}},
               {"Mia went home", {0, 1, 8}}, {"A bird sang", {0, 1, 8}}, {"The sun was hot", {0, 6, 1}},
               {x100, {1, 0, 202}}};
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        size_t got[4];
        run_slot(e, m, seq[i].text, 4, -1, got);
        for (int k = 0; k < 3; k++)
            if (got[k] != seq[i].want[k])
                test_fail(__FILE__, __LINE__, "request %zu: field %d is %zu, want %zu", i + 1, k, got[k],
                          seq[i].want[k]);
    }
    engine_metrics met;
    engine_metrics_get(e, &met, 0);
    CHECK_U64(met.n_decode, 24 + 10);       /* llama-server's n_decode_total: 24, then 34 */
    unload(e);
}

/* The prompt goes in decode calls of n_batch = min(-c, -b) tokens: a sink
 * that cancels at once stops after the first, which the slot keeps. */
TEST(engine_prefill_decode_calls_are_min_ctx_and_batch)
{
    NEED_MODEL();
    struct {
        size_t c, nb, nub, kept;
    } cases[] = {{512, 32, 0, 32}, {512, 32, 128, 32}, {512, 0, 32, 402}, {1024, 100, 64, 100}, {512, 600, 0, 402},
                 {300, 0, 0, 300}};   /* -c 300: 512 cells, but a batch of min(300, 2048) */
    char x200[512] = "";
    for (int i = 0; i < 200; i++) strcat(x200, "x ");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        engine_opts o;
        engine *e;
        slot_opts(&o, cases[i].c, 1, cases[i].nb, cases[i].nub);
        engine_model *m = load_o(&e, &o, 0, 0, 0);
        if (!m) return;
        int32_t *p;
        size_t n = tokens(m, x200, &p);
        CHECK_INT(n, 402);
        engine_request rq;
        engine_result res;
        engine_error er;
        rec r;
        engine_sink sink = {rec_token, rec_always, &r, NULL};
        engine_request_init(&rq);
        rq.prompt = p;
        rq.n_prompt = n;
        rq.greedy = 1;
        rq.n_predict = 4;
        rec_init(&r);
        CHECK_INT(engine_complete(e, m, &rq, &sink, &res, &er), 0);
        CHECK_INT(engine_model_n_slot(m), cases[i].kept);
        CHECK_INT(res.gone, 1);
        CHECK_INT(res.n_decoded, cases[i].kept < n ? 0 : 1);   /* a whole prompt gives its first token */
        engine_result_free(&res);
        engine_request_free(&rq);
        free(p);
        unload(e);
    }
}

/* A sink that records the progress events: each one's counts, the result's
 * counts then, and how many tokens had come before it. */
typedef struct {
    rec r;
    size_t n;
    size_t ev[32][7];          /* total, cache, processed, n_cached, n_processed, t_prompt_last set, tokens before */
    size_t stop_at;            /* on_progress returns 1 at this event (1-based; 0: never) */
} prog;

static int prog_event(void *ud, const engine_progress *p, const engine_result *g)
{
    prog *q = ud;
    if (q->n < 32) {
        size_t *v = q->ev[q->n];
        v[0] = p->total, v[1] = p->cache, v[2] = p->processed, v[3] = g->n_cached, v[4] = g->n_processed;
        v[5] = g->t_prompt_last != 0 && p->time_ms >= 0, v[6] = q->r.n;
    }
    q->n++;
    return q->stop_at && q->n == q->stop_at;
}

static int prog_token(void *ud, const engine_token *t, int stop_now, const engine_result *g)
{
    return rec_token(&((prog *)ud)->r, t, stop_now, g);
}

static void prog_run(engine *e, engine_model *m, const int32_t *p, size_t n, int cache_prompt, prog *q,
                     engine_result *res)
{
    engine_request rq;
    engine_error er;
    engine_sink sink = {prog_token, NULL, q, prog_event};
    engine_request_init(&rq);
    rq.prompt = p;
    rq.n_prompt = n;
    rq.greedy = 1;
    rq.n_predict = 2;
    rq.cache_prompt = cache_prompt;
    CHECK_INT(engine_complete(e, m, &rq, &sink, res, &er), 0);
    engine_request_free(&rq);
}

/* on_progress where llama-server b11669 sends its progress events (-c 512
 * -b 32): once before the first decode call (processed = cache, nothing
 * evaluated, no prompt time), then after each call of 32 tokens, every one
 * before the first token; with the prompt cached but one token, two
 * events; a nonzero answer stops the run and the slot keeps what was
 * evaluated. */
TEST(engine_progress_before_and_after_each_decode_call)
{
    NEED_MODEL();
    engine_opts o;
    engine *e;
    slot_opts(&o, 512, 1, 32, 0);
    engine_model *m = load_o(&e, &o, 0, 0, 0);
    if (!m) return;
    char x200[512] = "";
    for (int i = 0; i < 200; i++) strcat(x200, "x ");
    int32_t *p;
    size_t n = tokens(m, x200, &p);
    CHECK_INT(n, 402);
    prog q;
    engine_result res;
    memset(&q, 0, sizeof q);
    prog_run(e, m, p, n, 0, &q, &res);
    CHECK_INT(q.n, 1 + 13);    /* 12 calls of 32, one of 18 */
    for (size_t k = 0; k < q.n && k < 32; k++) {
        size_t done = k * 32 < n ? k * 32 : n;
        size_t want[7] = {402, 0, done, 0, done, k > 0, 0};
        CHECK(memcmp(q.ev[k], want, sizeof want) == 0);
    }
    CHECK_INT(q.r.n, 2);
    CHECK_INT(res.n_processed, 402);
    engine_result_free(&res);

    memset(&q, 0, sizeof q);   /* the same prompt again: 401 kept, one token evaluated */
    prog_run(e, m, p, n, 1, &q, &res);
    CHECK_INT(q.n, 2);
    size_t w0[7] = {402, 401, 401, 401, 0, 0, 0}, w1[7] = {402, 401, 402, 401, 1, 1, 0};
    CHECK(memcmp(q.ev[0], w0, sizeof w0) == 0);
    CHECK(memcmp(q.ev[1], w1, sizeof w1) == 0);
    engine_result_free(&res);

    memset(&q, 0, sizeof q);   /* stopped at the third event: after two calls */
    q.stop_at = 3;
    prog_run(e, m, p, n, 0, &q, &res);
    CHECK_INT(q.n, 3);
    CHECK_INT(res.gone, 1);
    CHECK_INT(q.r.n, 0);
    CHECK_INT(engine_model_n_slot(m), 64);
    engine_result_free(&res);
    free(p);
    unload(e);
}

/* --slot-prompt-similarity as llama-server b11669 takes it (-c 512 -np 2
 * -b 32, n_predict 8, temperature 0): 0.0 turns the similarity rule off,
 * so every request goes to the least recently used slot and an asked slot
 * is used as it is (no cache update: only the LRU branch asks for one);
 * 0.5 makes an asked slot that shares 1/20 keep nothing, so A comes back
 * into slot 1 from the host cache. */
TEST(engine_slot_prompt_similarity_zero_and_half)
{
    NEED_MODEL();
    struct {
        const char *text;
        int32_t id_slot;
        size_t want_off[4], want_half[4];
    } seq[] = {
        {S_A, -1, {0, 0, 20, 27}, {0, 0, 20, 27}},
        {S_B, -1, {1, 0, 26, 33}, {1, 0, 26, 33}},
        {S_A " outside", -1, {0, 24, 1, 32}, {0, 24, 1, 32}},
        {S_B " and", -1, {1, 26, 1, 34}, {1, 26, 1, 34}},
        {S_A, -1, {0, 19, 1, 27}, {0, 19, 1, 27}},
        {S_A, 1, {1, 1, 19, 27}, {1, 19, 1, 27}},
        {"Once upon a time there", -1, {0, 5, 1, 13}, {0, 5, 1, 13}},
    };
    for (int half = 0; half < 2; half++) {
        engine_opts o;
        engine *e;
        slot_opts(&o, 512, 2, 32, 0);
        o.slot_prompt_similarity = half ? 0.5f : -1.0f;
        engine_model *m = load_o(&e, &o, 0, 0, 0);
        if (!m) return;
        for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
            size_t got[4];
            const size_t *want = half ? seq[i].want_half : seq[i].want_off;
            run_slot(e, m, seq[i].text, 8, seq[i].id_slot, got);
            for (int k = 0; k < 4; k++)
                if (got[k] != want[k])
                    test_fail(__FILE__, __LINE__, "-sps %s, request %zu: field %d is %zu, want %zu",
                              half ? "0.5" : "0", i + 1, k, got[k], want[k]);
        }
        unload(e);
    }
}
