/*
 * par.c -- the persistent thread pool (see par.h for the contract).
 *
 * Why this shape: a matmul at decode time lasts tens of microseconds, so
 * spawning threads per call (bankML measured 88.8 us) or even waking them
 * more than once per matrix group is too dear. Workers are spawned once and
 * sleep on a condition variable; the caller publishes a job, bumps a
 * generation number, broadcasts, works as worker 0, then waits for the
 * others. A bounded spin before sleeping was measured by bankML on a 2-core
 * SMT machine (15.6 -> 162.6 us per run) and rejected, so there is none.
 *
 * Rows are claimed in chunks from one atomic counter (dynamic balancing:
 * bankML measured a static split 1.1x slower). Which worker computes a row
 * never changes how the row is computed, so results do not depend on the
 * thread count.
 */
#include "par.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The job list of one par_jobs call, shared by all workers for that wake. */
typedef struct {
    const par_job *jobs;
    size_t njobs;
    size_t total;           /* chunks over all jobs */
    atomic_size_t next;     /* next chunk index to claim */
} rows_job;

struct par_pool {
    int n;                  /* workers including the caller */
    pthread_t *th;          /* n - 1 spawned threads */
    int spawned;            /* how many of th[] were started */
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* caller -> workers: a new generation */
    pthread_cond_t done;    /* last worker -> caller: all finished */
    unsigned long gen;      /* bumped once per wake */
    int pending;            /* spawned workers still on this generation */
    int quit;
    par_run_fn fn;          /* the current job */
    void *ctx;
    unsigned long wakes;
};

typedef struct {
    par_pool *p;
    int id;
} worker_arg;

static size_t chunk_of(const par_job *j)
{
    return j->chunk ? j->chunk : PAR_CHUNK_ROWS;
}

static size_t chunks_of(const par_job *j)
{
    size_t c = chunk_of(j);
    return j->rows / c + (j->rows % c != 0);
}

/* Claims chunks until none are left. Each worker walks the job list forward
 * only (claims are increasing for a given worker), so finding a chunk's job
 * costs O(njobs) per wake, not per claim. */
static void rows_worker(void *ctx, int worker, int nworkers)
{
    rows_job *rj = ctx;
    size_t j = 0, base = 0;     /* job j's first chunk index is base */
    (void)nworkers;
    for (;;) {
        size_t k = atomic_fetch_add_explicit(&rj->next, 1,
                                             memory_order_relaxed);
        if (k >= rj->total) break;
        while (k >= base + chunks_of(&rj->jobs[j])) {
            base += chunks_of(&rj->jobs[j]);
            j++;
        }
        const par_job *jb = &rj->jobs[j];
        size_t c = chunk_of(jb);
        size_t r0 = (k - base) * c;
        size_t r1 = r0 + c < jb->rows ? r0 + c : jb->rows;
        jb->fn(jb->ctx, r0, r1, worker);
    }
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    par_pool *p = wa->p;
    int id = wa->id;
    unsigned long seen = 0;
    free(wa);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->gen == seen && !p->quit)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->gen;
        par_run_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);

        fn(ctx, id, p->n);

        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) snprintf(err, errlen, "%s", msg);
}

par_pool *par_create(int nthreads, char *err, size_t errlen)
{
    if (nthreads < 1) nthreads = 1;
    if (nthreads > PAR_MAX_THREADS) {
        if (err && errlen)
            snprintf(err, errlen, "%d threads asked; at most %d", nthreads,
                     PAR_MAX_THREADS);
        return NULL;
    }
    par_pool *p = calloc(1, sizeof *p);
    if (!p) {
        set_err(err, errlen, "out of memory for the thread pool");
        return NULL;
    }
    p->n = nthreads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (nthreads > 1) {
        p->th = calloc((size_t)nthreads - 1, sizeof *p->th);
        if (!p->th) {
            set_err(err, errlen, "out of memory for the thread pool");
            par_destroy(p);
            return NULL;
        }
    }
    for (int i = 1; i < nthreads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            set_err(err, errlen, "out of memory for the thread pool");
            par_destroy(p);
            return NULL;
        }
        wa->p = p;
        wa->id = i;
        if (pthread_create(&p->th[i - 1], NULL, worker_main, wa) != 0) {
            free(wa);
            if (err && errlen)
                snprintf(err, errlen, "cannot start thread %d of %d", i + 1,
                         nthreads);
            par_destroy(p);
            return NULL;
        }
        p->spawned++;
    }
    return p;
}

void par_destroy(par_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->spawned; i++) pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p);
}

int par_threads(const par_pool *p)
{
    return p ? p->n : 1;
}

unsigned long par_wakes(const par_pool *p)
{
    return p ? p->wakes : 0;
}

void par_run(par_pool *p, par_run_fn fn, void *ctx)
{
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->spawned;
    p->gen++;
    p->wakes++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    fn(ctx, 0, p->n);

    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void par_jobs(par_pool *p, const par_job *jobs, size_t njobs)
{
    rows_job rj;
    size_t total = 0;
    for (size_t i = 0; i < njobs; i++) total += chunks_of(&jobs[i]);
    if (total == 0) return;
    rj.jobs = jobs;
    rj.njobs = njobs;
    rj.total = total;
    atomic_init(&rj.next, 0);
    if (!p || p->n == 1 || total == 1) {
        rows_worker(&rj, 0, 1);
        return;
    }
    par_run(p, rows_worker, &rj);
}

void par_rows(par_pool *p, par_rows_fn fn, void *ctx, size_t rows,
              size_t chunk)
{
    par_job j = { fn, ctx, rows, chunk };
    par_jobs(p, &j, 1);
}
