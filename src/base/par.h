/*
 * par.h -- a persistent thread pool for the kernels: the caller is worker 0,
 * the other workers are spawned once; between jobs they spin for a bounded
 * time (PAR_SPIN_US) on a job sequence number, then sleep on a condition
 * variable; one hand-off per job; rows handed out in chunks from an atomic
 * counter.
 *
 * Bits never depend on the thread count: the pool only decides *who* runs a
 * range of rows, never how a row is computed. A row function must compute
 * each row of [row0, row1) exactly as it would alone (no sums across rows,
 * no state shared between workers except their own output rows).
 *
 * Threading contract:
 * - One pool is driven by one thread at a time (the thread that calls
 *   par_run / par_rows / par_jobs). Calls are synchronous: they return when
 *   every row has been done and every worker is idle again.
 * - A row or run function must not call back into the same pool (no nesting).
 * - Workers get a stable id in [0, par_threads(p)); worker 0 is the caller.
 *   Use it to index per-worker scratch buffers.
 * - pthreads + C11 atomics only.
 */
#ifndef BANKML_PAR_H
#define BANKML_PAR_H

#include <stddef.h>

/* Default rows per chunk (bankML measured 16 best; static splits were 1.1x
 * slower). A job with no more rows than its chunk, or a 1-thread pool, runs
 * inline on the caller without waking anyone. */
#define PAR_CHUNK_ROWS 16

/* A job with chunk 0 gets PAR_CHUNK_ROWS rows per chunk, or more on a large
 * job: about rows / (PAR_CHUNKS_PER_WORKER * workers), rounded up to a
 * multiple of 4. Why: each claim is an atomic on a line the other cores
 * also write, ~0.1 us on this VM, and a one-column (decode) chunk of 16
 * rows is only ~1 us of work; 2048x2048 Q1_0 on two threads took 97 us
 * with 16-row chunks and 88 us with 64 (one thread: 172 us). Sixteen
 * chunks per worker still balance a job to within a few percent. */
#define PAR_CHUNKS_PER_WORKER 16

/* How long (microseconds) an idle worker spins on the job sequence, and the
 * caller on the workers' completion, before sleeping on a condition
 * variable; an idle pool sleeps after this long, or at once after
 * par_pause. Covers the gaps between products and between tokens (sampling,
 * streaming), so a worker is not put to sleep during a request. Why 20 ms,
 * not the 50 us it was: on this 2-vCPU VM a worker woken from sleep often
 * did not run for milliseconds (its core idle, or the caller's), so a
 * 1536x576 BF16 product on two threads took its one-thread time with the
 * worker taking no rows, run after run; spinning through, the worker took
 * half the rows every time (40-60 us against 67-70 us). ggml's pool polls
 * ten times longer (1024 * 128 * 50 pauses, about 200 ms here).
 * PAR_SPIN_US_MAX bounds par_set_spin. */
#ifndef PAR_SPIN_US
#define PAR_SPIN_US 20000
#endif
/* The default for a pool of more threads than the process has cores: a
 * spinning worker would hold a core that another thread of the pool needs
 * (a 5 ms budget made 4 threads' tiny jobs on 2 vCPUs take 16 s, not 1 s). */
#define PAR_SPIN_US_SHARED 50
#define PAR_SPIN_US_MAX 100000

/* Upper bound on threads in one pool. */
#define PAR_MAX_THREADS 256

typedef struct par_pool par_pool;

/* Creates a pool of nthreads workers: nthreads - 1 threads are spawned, the
 * caller is worker 0. nthreads < 1 counts as 1 (nothing is spawned). Returns
 * NULL and fills err (a one-line reason) when nthreads > PAR_MAX_THREADS or a
 * thread cannot be created; err may be NULL. */
par_pool *par_create(int nthreads, char *err, size_t errlen);

/* Wakes the workers, tells them to exit, joins them and frees the pool.
 * NULL is allowed. Must not be called while a job is running. */
void par_destroy(par_pool *p);

/* Number of workers including the caller (>= 1). A NULL pool counts as 1. */
int par_threads(const par_pool *p);

/* Runs fn(ctx, worker, nworkers) once on every worker (worker 0 on the caller)
 * and returns when all have returned. A NULL pool runs fn(ctx, 0, 1). */
typedef void (*par_run_fn)(void *ctx, int worker, int nworkers);
void par_run(par_pool *p, par_run_fn fn, void *ctx);

/* A range of rows [row0, row1) of one job, run by worker `worker`. */
typedef void (*par_rows_fn)(void *ctx, size_t row0, size_t row1, int worker);

/* One matrix's worth of rows. chunk 0 means the default (PAR_CHUNK_ROWS, or
 * more for a large job: see PAR_CHUNKS_PER_WORKER). */
typedef struct {
    par_rows_fn fn;
    void *ctx;
    size_t rows;
    size_t chunk;
} par_job;

/* The rows per chunk a job of `rows` rows with chunk 0 gets on p (NULL or a
 * 1-thread pool: as for one worker), for callers that cap the default. */
size_t par_default_chunk(const par_pool *p, size_t rows);

/* Runs fn over rows [0, rows) in chunks claimed dynamically by all workers;
 * one wake. Returns when every row is done. A NULL pool runs inline. */
void par_rows(par_pool *p, par_rows_fn fn, void *ctx, size_t rows,
              size_t chunk);

/* Runs several jobs (e.g. Q, K and V; gate and up) in ONE wake: the chunks of
 * all jobs form one list, claimed from one atomic counter; a chunk never
 * crosses from one job into the next. Jobs with rows == 0 are skipped.
 * Returns when every chunk of every job is done. */
void par_jobs(par_pool *p, const par_job *jobs, size_t njobs);

/* Ends the workers' spin now: an idle worker sleeps until the next job
 * instead of spinning out its budget (the next job clears this). For a
 * caller that knows no job comes soon -- the end of a request -- or that
 * hands the cores to other work, as a benchmark timing another library
 * does. NULL is a no-op. */
void par_pause(par_pool *p);

/* Sets the spin budget of p (see PAR_SPIN_US; above PAR_SPIN_US_MAX is
 * clamped; 0 = sleep at once, the old condvar-only behaviour). Call it
 * between jobs, from the driving thread. NULL is ignored. */
void par_set_spin(par_pool *p, unsigned spin_us);

/* The spin budget of p in microseconds (NULL -> 0). */
unsigned par_spin(const par_pool *p);

/* Number of jobs handed to the workers since par_create, whether they were
 * spinning or asleep (for tests and benchmarks: par_jobs over several
 * matrices counts one; inline jobs count none). */
unsigned long par_wakes(const par_pool *p);

#endif
