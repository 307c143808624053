/*
 * test_engine.c -- the engine through engine.h only: a real slot on
 * stories260K (../shared, pinned here into a mkdtemp FORK.json; SKIP
 * without it). The prompt-cache reuse rule, the host prompt cache, stop
 * strings, the budget and the context limit, cancellation, the registry
 * and its error kinds, and seeded sampling.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "file/pin.h"
#include "test.h"

/* ---- fixture: stories260K pinned into a temporary FORK.json ------------- */

static char tmpdir[64];
static char fork_path[128];
static char model_path[4096];

/* The temporary directory with stories260K.FORK.json in it; NULL (and the
 * caller SKIPs) when ../shared has no stories260K. */
static const char *fixture(void)
{
    const char *p = test_shared("models/stories260K.gguf");
    if (!p) return NULL;
    if (tmpdir[0]) return tmpdir;
    snprintf(model_path, sizeof model_path, "%s", p);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/bankml-test-engine-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        tmpdir[0] = 0;
        return NULL;
    }
    snprintf(fork_path, sizeof fork_path, "%s/stories260K.FORK.json", tmpdir);
    char sha[65], err[512];
    if (pin_write(model_path, fork_path, sha, err, sizeof err) != 0) {
        fprintf(stderr, "test_engine: %s\n", err);
        return NULL;
    }
    return tmpdir;
}

/* Removes the fixture's files (registered once, run at exit). */
static void fixture_rm(void)
{
    char p[256];
    if (!tmpdir[0]) return;
    const char *names[] = {"stories260K.FORK.json", "other.FORK.json", "unpinned.gguf", "wrong.FORK.json",
                           "wrong.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, names[i]);
        unlink(p);
    }
    rmdir(tmpdir);
}

__attribute__((constructor)) static void fixture_at_exit(void) { atexit(fixture_rm); }

#define NEED_MODEL()                                                                   \
    do {                                                                               \
        if (!fixture()) SKIP("../shared/models/stories260K.gguf is absent");           \
    } while (0)

/* An engine with stories260K as entry 0; cache_on/limit for the host
 * prompt cache, n_ctx its context (0: 4096). */
static engine *open_engine(int cache_on, size_t cache_limit, size_t n_ctx)
{
    engine_opts o;
    engine_error er;
    memset(&o, 0, sizeof o);
    o.n_ctx = n_ctx;
    o.threads = 1;
    o.keep_alive_ms = -1;
    o.cache_on = cache_on;
    o.cache_limit = cache_limit;
    engine *e = engine_new(&o, &er);
    if (!e) return NULL;
    if (engine_add(e, "stories260K.gguf", model_path, fork_path, 1) != 0) {
        engine_free(e);
        return NULL;
    }
    return e;
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
    int prefix_ok;             /* every released text so far was a prefix of so_far->text */
} rec;

static int rec_token(void *ud, const engine_token *t, int stop_now, const engine_result *so_far)
{
    rec *r = ud;
    (void)stop_now;
    if (r->n < REC_MAX) r->toks[r->n] = t->tok;
    r->n++;
    if (r->sent_len + t->text_len < sizeof r->sent) {
        memcpy(r->sent + r->sent_len, t->text, t->text_len);
        r->sent_len += t->text_len;
    }
    size_t o = strlen(r->log);
    snprintf(r->log + o, sizeof r->log - o, "%.*s|", (int)t->text_len, t->text);
    /* what reached the sink is never more than the answer so far */
    if (r->sent_len > so_far->text.len || memcmp(r->sent, so_far->text.p, r->sent_len) != 0) r->prefix_ok = 0;
    return r->refuse_at && r->n == r->refuse_at;
}

static int rec_cancelled(void *ud)
{
    rec *r = ud;
    return r->cancel_after && r->n >= r->cancel_after;
}

static void rec_init(rec *r)
{
    memset(r, 0, sizeof *r);
    r->prefix_ok = 1;
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
    engine_sink sink = {rec_token, rec_cancelled, r};
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

/* Acquires entry 0 of a new engine; NULL (and a failed check) when either fails. */
static engine_model *load(engine **e, int cache_on, size_t cache_limit, size_t n_ctx)
{
    engine_error er;
    *e = open_engine(cache_on, cache_limit, n_ctx);
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
    engine_sink sink = {rec_token, NULL, &r};
    rec_init(&r);
    CHECK_INT(run(e, m, a, na, 8, 1, &r, &res), 0);
    engine_result_free(&res);
    rec_init(&r);
    CHECK_INT(run(e, m, b, nb, 8, 1, &r, &res), 0);
    engine_result_free(&res);
    CHECK_INT(engine_model_n_slot(m), 30);
    engine_select(e, m, a, na);                 /* B saved, A's 23 cells back */
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
