/*
 * par.c -- the persistent thread pool (see par.h for the contract).
 *
 * Why this shape: a matmul at decode time lasts tens of microseconds, so
 * spawning threads per call (bankML measured 88.8 us) or even waking them
 * more than once per matrix group is too dear. Workers are spawned once.
 * The caller publishes a job (fn, ctx), bumps an atomic job sequence, works
 * as worker 0, then waits for the others.
 *
 * Hand-off: a condvar wake alone cost more than a whole 576x576 product
 * (17.6 us on one thread, 42.9 us on two), so both sides first spin for a
 * bounded time (PAR_SPIN_US by default, with a pause instruction per turn):
 * an idle worker watches the sequence, the caller watches the pending count.
 * Only when the spin runs out does either side sleep on a condition
 * variable, so an idle pool costs no CPU once the spin has run out. The
 * sleep paths use the Dekker pattern on seq_cst atomics (announce you sleep,
 * then re-check; publish, then look for sleepers) with the check and the
 * wait under the mutex, so a wake-up cannot be lost.
 *
 * Spinning alone was not enough on a loaded 2-core machine: a spinning
 * worker that the kernel preempts gets no wake-up, and the caller waited a
 * time slice for it (a 576x576 product took 80-140 us on two threads). So a
 * row job closes out every worker that has not yet taken it once the caller
 * has run out of chunks (one compare-and-swap per worker slot): two threads
 * then cost about what one does when the second core is busy.
 *
 * Stepping aside: on this 2-vCPU VM the scheduler at times kept a worker on
 * the caller's core for tens of milliseconds while the other core idled.
 * Both then share one core: the caller's product took 2-3x its one-thread
 * time and the worker took almost no rows (a 1536x576 BF16 product: 168 us
 * on "two" threads, 61 us on one). Pinning caller and worker to different
 * cores never showed it, but pins would hold against other load too. So
 * the caller notes its core at each job, and a worker that finds itself on
 * that core (checked when it takes a job and every 64 spin turns) moves
 * itself off it (affinity without that core, then the whole set back: the
 * move sticks, the mask stays free).
 *
 * Rows are claimed in chunks from one atomic counter (dynamic balancing:
 * bankML measured a static split 1.1x slower). Which worker computes a row
 * never changes how the row is computed, so results do not depend on the
 * thread count.
 */
#include "base/par.h"
#include "base/base.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* The job list of one par_jobs call, shared by all workers for that wake. */
typedef struct {
    const par_job *jobs;
    size_t njobs;
    size_t total;           /* chunks over all jobs */
    size_t nworkers;        /* sizes the default chunk (chunk_of) */
    atomic_size_t next;     /* next chunk index to claim */
} rows_job;

/* One spawned worker's claim on the current job, on its own cache line.
 * The caller stores the job's sequence number; whoever first swaps it to 0
 * -- the worker (to run the job) or the caller (to close a row job the
 * worker has not started) -- owns that worker's share. */
typedef struct {
    atomic_ulong job;
    char pad[64 - sizeof(atomic_ulong)];
} par_slot;

struct par_pool {
    int n;                  /* workers including the caller */
    pthread_t *th;          /* n - 1 spawned threads */
    int spawned;            /* how many of th[] were started */
    pthread_mutex_t mu;     /* guards only the sleep paths below */
    pthread_cond_t wake;    /* caller -> sleeping workers: a new job */
    pthread_cond_t done;    /* last worker -> sleeping caller: all finished */
    atomic_ulong seq;       /* job sequence; bumped once per wake and at quit */
    atomic_int pending;     /* spawned workers still on the current job */
    atomic_int sleepers;    /* workers inside (or entering) the wake wait */
    atomic_int waiting;     /* 1 while the caller sleeps on `done` */
    atomic_int quit;
    atomic_uint spin_us;    /* bounded spin before sleeping, microseconds */
    par_slot *slot;         /* slot[i - 1]: worker i's claim on the job */
    atomic_int caller_cpu;  /* the caller's core at the last job, or -1 */
    atomic_int paused;      /* par_pause: idle workers sleep without spinning */
    cpu_set_t allowed;      /* the process's cores when the pool was made */
    int can_move;           /* allowed holds 2 or more cores */
    par_run_fn fn;          /* the current job: written before seq is bumped */
    void *ctx;
    unsigned long wakes;
};

typedef struct {
    par_pool *p;
    int id;
} worker_arg;

/* The job's chunk: its own, or the default for nworkers workers (par.h). */
static size_t chunk_of(const par_job *j, size_t nworkers)
{
    if (j->chunk) return j->chunk;
    size_t c = j->rows / (nworkers * PAR_CHUNKS_PER_WORKER);
    c = c + (4 - c % 4) % 4;
    return c > PAR_CHUNK_ROWS ? c : PAR_CHUNK_ROWS;
}

size_t par_default_chunk(const par_pool *p, size_t rows)
{
    par_job j = {NULL, NULL, rows, 0};
    return chunk_of(&j, (size_t)par_threads(p));
}

static size_t chunks_of(const par_job *j, size_t nworkers)
{
    size_t c = chunk_of(j, nworkers);
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
        while (k >= base + chunks_of(&rj->jobs[j], rj->nworkers)) {
            base += chunks_of(&rj->jobs[j], rj->nworkers);
            j++;
        }
        const par_job *jb = &rj->jobs[j];
        size_t c = chunk_of(jb, rj->nworkers);
        size_t r0 = (k - base) * c;
        size_t r1 = r0 + c < jb->rows ? r0 + c : jb->rows;
        jb->fn(jb->ctx, r0, r1, worker);
    }
}

/* One turn of a spin loop: tells the core (and an SMT sibling) we wait. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Moves the calling worker off the caller's core if it sits on it (see
 * "Stepping aside" above). */
static void step_aside(par_pool *p)
{
    if (!p->can_move) return;
    int c = sched_getcpu();
    if (c < 0 || c != atomic_load_explicit(&p->caller_cpu, memory_order_relaxed)) return;
    cpu_set_t others = p->allowed;
    CPU_CLR(c, &others);
    if (pthread_setaffinity_np(pthread_self(), sizeof others, &others) == 0)
        pthread_setaffinity_np(pthread_self(), sizeof p->allowed, &p->allowed);
}

/* A worker's spin: until the job sequence differs from `old`, for at most
 * spin_us microseconds. The clock (and the core, for step_aside) is read
 * only every 64 turns: a turn with pause is tens of ns. Returns 1 when a new
 * job was published. */
static int spin_seq(par_pool *p, unsigned long old, unsigned spin_us)
{
    if (spin_us == 0 || atomic_load_explicit(&p->paused, memory_order_relaxed))
        return atomic_load(&p->seq) != old;
    uint64_t end = (uint64_t)bk_mono_ns() + (uint64_t)spin_us * 1000u;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&p->seq, memory_order_acquire) != old) return 1;
        cpu_relax();
        if ((i & 63) == 0) {
            if ((uint64_t)bk_mono_ns() >= end || atomic_load_explicit(&p->paused, memory_order_relaxed)) return 0;
            step_aside(p);
        }
    }
}

static int spin_zero(atomic_int *a, unsigned spin_us)
{
    if (spin_us == 0) return atomic_load(a) == 0;
    uint64_t end = (uint64_t)bk_mono_ns() + (uint64_t)spin_us * 1000u;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(a, memory_order_acquire) == 0) return 1;
        cpu_relax();
        if ((i & 63) == 0 && (uint64_t)bk_mono_ns() >= end) return 0;
    }
}

/* A worker: spin briefly for the next job, else sleep on `wake`; run it;
 * the last one to finish wakes the caller only if the caller sleeps. */
static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    par_pool *p = wa->p;
    int id = wa->id;
    unsigned long seen = 0;
    free(wa);
    for (;;) {
        if (!spin_seq(p, seen, atomic_load_explicit(&p->spin_us, memory_order_relaxed))) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);      /* seq_cst: then re-check */
            while (atomic_load(&p->seq) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        seen = atomic_load_explicit(&p->seq, memory_order_acquire);
        if (atomic_load(&p->quit)) return NULL;
        unsigned long want = seen;
        if (!atomic_compare_exchange_strong(&p->slot[id - 1].job, &want, 0))
            continue;           /* the caller closed this job: all rows done */
        par_run_fn fn = p->fn;
        void *ctx = p->ctx;

        step_aside(p);
        fn(ctx, id, p->n);

        /* After this decrement the job (ctx) may be gone: touch only p. */
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
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
        bk_err(err, errlen, "out of memory for the thread pool");
        return NULL;
    }
    p->n = nthreads;
    atomic_init(&p->seq, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->waiting, 0);
    atomic_init(&p->quit, 0);
    atomic_init(&p->spin_us, PAR_SPIN_US);
    atomic_init(&p->caller_cpu, -1);
    atomic_init(&p->paused, 0);
    int ncpu = sched_getaffinity(0, sizeof p->allowed, &p->allowed) == 0 ? CPU_COUNT(&p->allowed) : 0;
    p->can_move = ncpu >= 2;
    /* more threads than cores: a spinning worker holds a core another
     * needs, so spin only briefly (see PAR_SPIN_US_SHARED) */
    if (ncpu > 0 && nthreads > ncpu)
        atomic_store(&p->spin_us, PAR_SPIN_US_SHARED);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (nthreads > 1) {
        p->th = calloc((size_t)nthreads - 1, sizeof *p->th);
        p->slot = calloc((size_t)nthreads - 1, sizeof *p->slot);
        if (!p->th || !p->slot) {
            bk_err(err, errlen, "out of memory for the thread pool");
            par_destroy(p);
            return NULL;
        }
    }
    for (int i = 1; i < nthreads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            bk_err(err, errlen, "out of memory for the thread pool");
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

/* Publishes a new sequence number and wakes whoever sleeps on it. The
 * seq_cst increment followed by the seq_cst load of `sleepers` pairs with
 * the worker's increment of `sleepers` then load of `seq`: at least one side
 * sees the other, and the broadcast is under the mutex, so it cannot fall
 * between a worker's check and its wait. */
static int publish(par_pool *p)
{
    atomic_fetch_add(&p->seq, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        return 1;
    }
    return 0;
}

void par_destroy(par_pool *p)
{
    if (!p) return;
    atomic_store(&p->quit, 1);
    publish(p);
    for (int i = 0; i < p->spawned; i++) pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p->slot);
    free(p);
}

void par_set_spin(par_pool *p, unsigned spin_us)
{
    if (!p) return;
    if (spin_us > PAR_SPIN_US_MAX) spin_us = PAR_SPIN_US_MAX;
    atomic_store_explicit(&p->spin_us, spin_us, memory_order_relaxed);
}

void par_pause(par_pool *p)
{
    if (p) atomic_store_explicit(&p->paused, 1, memory_order_relaxed);
}

unsigned par_spin(const par_pool *p)
{
    return p ? atomic_load_explicit(&((par_pool *)p)->spin_us,
                                    memory_order_relaxed) : 0;
}

int par_threads(const par_pool *p)
{
    return p ? p->n : 1;
}

unsigned long par_wakes(const par_pool *p)
{
    return p ? p->wakes : 0;
}

/* Hands fn to every worker and runs it as worker 0. When `closable` (row
 * jobs: the caller's own run only returns once no chunk is left), workers
 * that have not yet taken the job are closed out rather than waited for: a
 * worker descheduled by other load then costs nothing, where otherwise the
 * caller would wait a whole time slice for it to find an empty job. */
static void run_job(par_pool *p, par_run_fn fn, void *ctx, int closable)
{
    /* Every worker finished or was closed out of the last job before the
     * last call returned, so nobody reads fn/ctx now; the release in
     * publish() hands them over. */
    p->fn = fn;
    p->ctx = ctx;
    if (p->can_move)
        atomic_store_explicit(&p->caller_cpu, sched_getcpu(), memory_order_relaxed);
    atomic_store_explicit(&p->paused, 0, memory_order_relaxed);
    unsigned long s = atomic_load_explicit(&p->seq, memory_order_relaxed) + 1;
    for (int i = 0; i < p->spawned; i++)
        atomic_store_explicit(&p->slot[i].job, s, memory_order_relaxed);
    atomic_store_explicit(&p->pending, p->spawned, memory_order_relaxed);
    p->wakes++;
    /* Woken workers may have been put on this core (see "Stepping aside"):
     * one yield lets such a worker run now and move off, where otherwise it
     * would wait for this thread's time slice to end. */
    if (publish(p) && p->can_move)
        sched_yield();

    fn(ctx, 0, p->n);

    if (closable) {
        for (int i = 0; i < p->spawned; i++) {
            unsigned long want = s;
            if (atomic_compare_exchange_strong(&p->slot[i].job, &want, 0))
                atomic_fetch_sub(&p->pending, 1);
        }
    }
    unsigned spin = atomic_load_explicit(&p->spin_us, memory_order_relaxed);
    if (!spin_zero(&p->pending, spin)) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->waiting, 1);               /* seq_cst: then re-check */
        while (atomic_load(&p->pending) > 0)
            pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->waiting, 0);
        pthread_mutex_unlock(&p->mu);
    }
}

void par_run(par_pool *p, par_run_fn fn, void *ctx)
{
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    run_job(p, fn, ctx, 0);
}

void par_jobs(par_pool *p, const par_job *jobs, size_t njobs)
{
    rows_job rj;
    size_t total = 0, nw = (size_t)par_threads(p);
    for (size_t i = 0; i < njobs; i++) total += chunks_of(&jobs[i], nw);
    if (total == 0) return;
    rj.jobs = jobs;
    rj.njobs = njobs;
    rj.total = total;
    rj.nworkers = nw;
    atomic_init(&rj.next, 0);
    if (!p || p->n == 1 || total == 1) {
        rows_worker(&rj, 0, 1);
        return;
    }
    run_job(p, rows_worker, &rj, 1);
}

void par_rows(par_pool *p, par_rows_fn fn, void *ctx, size_t rows,
              size_t chunk)
{
    par_job j = { fn, ctx, rows, chunk };
    par_jobs(p, &j, 1);
}
