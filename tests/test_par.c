/*
 * test_par.c -- the thread pool: every row of every job is run exactly once
 * whatever the thread count, several jobs share one wake, tiny jobs run
 * inline, and pools start and stop cleanly.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/par.h"
#include "test.h"

typedef struct {
    atomic_int *visits;
    double *out;
    size_t base;                /* row offset of this job in visits/out */
} rows_ctx;

/* Writes a value that depends only on the row, and counts visits. */
static void fill_rows(void *vctx, size_t r0, size_t r1, int worker)
{
    rows_ctx *c = vctx;
    (void)worker;
    for (size_t r = r0; r < r1; r++) {
        atomic_fetch_add(&c->visits[c->base + r], 1);
        c->out[c->base + r] = (double)r * (double)r + 0.5;
    }
}

TEST(par_every_row_once_for_1_to_4_threads)
{
    const size_t rows = 10007;
    double *ref = NULL;
    for (int nth = 1; nth <= 4; nth++) {
        char err[100];
        par_pool *p = par_create(nth, err, sizeof err);
        CHECK(p != NULL);
        if (!p) return;
        CHECK_INT(par_threads(p), nth);
        atomic_int *v = calloc(rows, sizeof *v);
        double *out = calloc(rows, sizeof *out);
        rows_ctx c = { v, out, 0 };
        par_rows(p, fill_rows, &c, rows, 16);
        size_t bad = 0;
        for (size_t r = 0; r < rows; r++) bad += atomic_load(&v[r]) != 1;
        CHECK_INT(bad, 0);
        CHECK(out[rows - 1] == 10006.0 * 10006.0 + 0.5);
        if (!ref) ref = out;
        else { CHECK_MEM(out, ref, rows * sizeof *out); free(out); }
        free(v);
        par_destroy(p);
    }
    free(ref);
}

TEST(par_several_jobs_in_one_wake)
{
    char err[100];
    par_pool *p = par_create(3, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    atomic_int v[300];
    double out[300];
    for (int i = 0; i < 300; i++) atomic_init(&v[i], 0);
    rows_ctx c[4] = { { v, out, 0 }, { v, out, 100 }, { v, out, 137 }, { v, out, 137 } };
    par_job jobs[4] = {
        { fill_rows, &c[0], 100, 0 },       /* default chunk: 7 chunks */
        { fill_rows, &c[1], 37, 5 },        /* 8 chunks, the last of 2 rows */
        { fill_rows, &c[2], 0, 3 },         /* empty: skipped */
        { fill_rows, &c[3], 163, 1 },       /* 163 chunks of one row */
    };
    unsigned long w0 = par_wakes(p);
    par_jobs(p, jobs, 4);
    CHECK_INT(par_wakes(p) - w0, 1);
    int bad = 0;
    for (int i = 0; i < 300; i++) bad += atomic_load(&v[i]) != 1;
    CHECK_INT(bad, 0);
    CHECK(out[100] == 0.5);             /* row 0 of job 1 */
    CHECK(out[136] == 36.0 * 36.0 + 0.5);
    CHECK(out[299] == 162.0 * 162.0 + 0.5);
    par_destroy(p);
}

/* Records how rows were handed out: calls, and the largest and smallest
 * range (the last chunk of a job may be shorter). */
typedef struct {
    atomic_int calls, max_rows, min_rows;
} chunk_log;

static void log_chunks(void *vctx, size_t r0, size_t r1, int worker)
{
    chunk_log *l = vctx;
    int n = (int)(r1 - r0), m;
    (void)worker;
    atomic_fetch_add(&l->calls, 1);
    while ((m = atomic_load(&l->max_rows)) < n && !atomic_compare_exchange_weak(&l->max_rows, &m, n)) {}
    while ((m = atomic_load(&l->min_rows)) > n && !atomic_compare_exchange_weak(&l->min_rows, &m, n)) {}
}

TEST(par_default_chunk_grows_with_the_job)
{
    char err[100];
    par_pool *p = par_create(2, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    /* 2048 rows on 2 workers: 2048 / (2 * 16) = 64 rows per chunk */
    chunk_log l = { 0, 0, 1 << 30 };
    par_rows(p, log_chunks, &l, 2048, 0);
    CHECK_INT(atomic_load(&l.calls), 32);
    CHECK_INT(atomic_load(&l.max_rows), 64);
    CHECK_INT(atomic_load(&l.min_rows), 64);
    /* 1000 rows: 1000 / 32 = 31, rounded up to 32: 31 chunks + one of 8 */
    chunk_log m = { 0, 0, 1 << 30 };
    par_rows(p, log_chunks, &m, 1000, 0);
    CHECK_INT(atomic_load(&m.calls), 32);
    CHECK_INT(atomic_load(&m.max_rows), 32);
    CHECK_INT(atomic_load(&m.min_rows), 8);
    /* small jobs keep PAR_CHUNK_ROWS: 100 rows -> 7 chunks, the last of 4 */
    chunk_log s = { 0, 0, 1 << 30 };
    par_rows(p, log_chunks, &s, 100, 0);
    CHECK_INT(atomic_load(&s.calls), 7);
    CHECK_INT(atomic_load(&s.max_rows), PAR_CHUNK_ROWS);
    CHECK_INT(atomic_load(&s.min_rows), 4);
    /* an explicit chunk is kept whatever the size */
    chunk_log e = { 0, 0, 1 << 30 };
    par_rows(p, log_chunks, &e, 2048, 16);
    CHECK_INT(atomic_load(&e.calls), 128);
    CHECK_INT(atomic_load(&e.max_rows), 16);
    /* par_default_chunk tells the same sizes without running a job */
    CHECK_INT(par_default_chunk(p, 2048), 64);
    CHECK_INT(par_default_chunk(p, 1000), 32);
    CHECK_INT(par_default_chunk(p, 100), PAR_CHUNK_ROWS);
    CHECK_INT(par_default_chunk(p, 4096), 128);
    CHECK_INT(par_default_chunk(NULL, 4096), 256); /* one worker: 4096 / 16 */
    par_destroy(p);
}

TEST(par_small_jobs_run_inline)
{
    char err[100];
    par_pool *p = par_create(2, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    atomic_int v[16];
    double out[16];
    for (int i = 0; i < 16; i++) atomic_init(&v[i], 0);
    rows_ctx c = { v, out, 0 };
    par_rows(p, fill_rows, &c, 16, 0);      /* one chunk: no wake */
    CHECK_INT(par_wakes(p), 0);
    CHECK_INT(atomic_load(&v[15]), 1);
    par_rows(p, fill_rows, &c, 0, 0);       /* nothing at all */
    CHECK_INT(par_wakes(p), 0);
    par_rows(NULL, fill_rows, &c, 16, 4);   /* no pool: inline */
    CHECK_INT(atomic_load(&v[0]), 2);
    par_destroy(p);
}

static void mark_worker(void *ctx, int worker, int nworkers)
{
    atomic_int *seen = ctx;
    atomic_fetch_add(&seen[worker], 1);
    atomic_fetch_add(&seen[8], nworkers);
}

TEST(par_run_calls_every_worker_once)
{
    char err[100];
    par_pool *p = par_create(4, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    atomic_int seen[9];
    for (int i = 0; i < 9; i++) atomic_init(&seen[i], 0);
    par_run(p, mark_worker, seen);
    for (int i = 0; i < 4; i++) CHECK_INT(atomic_load(&seen[i]), 1);
    CHECK_INT(atomic_load(&seen[4]), 0);
    CHECK_INT(atomic_load(&seen[8]), 16);
    par_destroy(p);
    for (int i = 0; i < 9; i++) atomic_store(&seen[i], 0);
    par_run(NULL, mark_worker, seen);
    CHECK_INT(atomic_load(&seen[0]), 1);
    CHECK_INT(atomic_load(&seen[8]), 1);
}

TEST(par_many_wakes_no_hang_and_clean_restarts)
{
    atomic_int v[64];
    double out[64];
    for (int round = 0; round < 20; round++) {
        char err[100];
        par_pool *p = par_create(1 + round % 4, err, sizeof err);
        CHECK(p != NULL);
        if (!p) return;
        for (int i = 0; i < 64; i++) atomic_init(&v[i], 0);
        rows_ctx c = { v, out, 0 };
        for (int k = 0; k < 200; k++) par_rows(p, fill_rows, &c, 64, 2);
        int bad = 0;
        for (int i = 0; i < 64; i++) bad += atomic_load(&v[i]) != 200;
        CHECK_INT(bad, 0);
        CHECK_INT(par_wakes(p), round % 4 == 0 ? 0 : 200);
        par_destroy(p);
    }
    par_destroy(NULL);
}

TEST(par_create_refuses_too_many_threads)
{
    char err[100] = "";
    CHECK(par_create(PAR_MAX_THREADS + 1, err, sizeof err) == NULL);
    CHECK_STR(err, "257 threads asked; at most 256");
    par_pool *p = par_create(0, err, sizeof err);     /* counts as 1 */
    CHECK(p != NULL);
    CHECK_INT(par_threads(p), 1);
    CHECK_INT(par_threads(NULL), 1);
    par_destroy(p);
}

TEST(par_spin_budget_default_set_and_clamped)
{
    char err[100];
    par_pool *p = par_create(2, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    cpu_set_t cs;
    CHECK_INT(sched_getaffinity(0, sizeof cs, &cs), 0);
    int ncpu = CPU_COUNT(&cs);
    CHECK_INT(par_spin(p), ncpu >= 2 ? PAR_SPIN_US : PAR_SPIN_US_SHARED);
    par_set_spin(p, 0);
    CHECK_INT(par_spin(p), 0);
    par_set_spin(p, PAR_SPIN_US_MAX + 1);
    CHECK_INT(par_spin(p), PAR_SPIN_US_MAX);
    par_set_spin(NULL, 7);              /* ignored */
    CHECK_INT(par_spin(NULL), 0);
    par_destroy(p);
    /* more threads than cores: the short default */
    p = par_create(ncpu + 1, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    CHECK_INT(par_spin(p), PAR_SPIN_US_SHARED);
    par_destroy(p);
}

/* Many tiny jobs back to back, with the workers spinning (default budget),
 * sleeping every time (budget 0) and spinning long: every row exactly once
 * per job, par_run reaches every worker every time, no hang. */
TEST(par_many_tiny_jobs_2_to_4_threads_every_spin)
{
    static const unsigned spins[3] = { PAR_SPIN_US, 0, 1000 };
    atomic_int v[40];
    double out[40];
    atomic_int seen[9];
    for (int nth = 2; nth <= 4; nth++) {
        for (int s = 0; s < 3; s++) {
            char err[100];
            par_pool *p = par_create(nth, err, sizeof err);
            CHECK(p != NULL);
            if (!p) return;
            par_set_spin(p, spins[s]);
            for (int i = 0; i < 40; i++) atomic_init(&v[i], 0);
            for (int i = 0; i < 9; i++) atomic_init(&seen[i], 0);
            rows_ctx c = { v, out, 0 };
            for (int k = 0; k < 400; k++) {
                par_rows(p, fill_rows, &c, 40, 1);      /* 40 one-row chunks */
                if (k % 4 == 0) par_run(p, mark_worker, seen);
            }
            int bad = 0;
            for (int i = 0; i < 40; i++) bad += atomic_load(&v[i]) != 400;
            CHECK_INT(bad, 0);
            for (int i = 0; i < nth; i++) CHECK_INT(atomic_load(&seen[i]), 100);
            CHECK_INT(atomic_load(&seen[nth]), 0);
            CHECK_INT(atomic_load(&seen[8]), 100 * nth * nth);
            CHECK_INT(par_wakes(p), 500);
            par_destroy(p);
        }
    }
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {}
}

/* No lost wake-up: each job comes after the workers' spin has run out, so
 * every hand-off goes through the sleep path; par_run must still reach
 * every worker each time (nobody can be closed out of a par_run). */
TEST(par_jobs_after_workers_sleep_are_not_lost)
{
    char err[100];
    par_pool *p = par_create(3, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    par_set_spin(p, 20);
    atomic_int seen[9];
    for (int i = 0; i < 9; i++) atomic_init(&seen[i], 0);
    atomic_int v[64];
    double out[64];
    for (int i = 0; i < 64; i++) atomic_init(&v[i], 0);
    rows_ctx c = { v, out, 0 };
    for (int k = 0; k < 30; k++) {
        sleep_ms(2);                    /* 100x the spin: workers asleep */
        par_run(p, mark_worker, seen);
        sleep_ms(1);
        par_rows(p, fill_rows, &c, 64, 4);
    }
    for (int i = 0; i < 3; i++) CHECK_INT(atomic_load(&seen[i]), 30);
    CHECK_INT(atomic_load(&seen[8]), 30 * 3 * 3);
    int bad = 0;
    for (int i = 0; i < 64; i++) bad += atomic_load(&v[i]) != 30;
    CHECK_INT(bad, 0);
    par_destroy(p);
}

/* An idle pool sleeps once its spin has run out: 4 threads idle for 200 ms
 * (10x the default spin) cost well under 20 ms of CPU, where spinning
 * workers would cost about 600 ms. */
TEST(par_idle_pool_does_not_burn_cpu)
{
    char err[100];
    par_pool *p = par_create(4, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    atomic_int seen[9];
    for (int i = 0; i < 9; i++) atomic_init(&seen[i], 0);
    par_run(p, mark_worker, seen);
    sleep_ms(PAR_SPIN_US / 1000 + 20);  /* let the spin run out */
    double c0 = cpu_seconds();
    sleep_ms(200);
    double used = cpu_seconds() - c0;
    CHECK(used < 0.020);
    par_run(p, mark_worker, seen);      /* and it still wakes up */
    CHECK_INT(atomic_load(&seen[3]), 2);
    par_destroy(p);
}

/* par_pause ends the spin at once: with a 100 ms budget, the spinning worker
 * would burn about 100 ms of CPU in the 100 ms after a job; paused, it
 * sleeps (under 20 ms, the pause reaching it within 64 spin turns). The
 * next job clears the pause: the worker then spins again (a second job right
 * after runs on every worker), and a NULL pool is a no-op. Two threads, no
 * more than the cores a CI machine has, so spinning starves nobody. */
TEST(par_pause_ends_the_spin_and_the_next_job_clears_it)
{
    char err[100];
    par_pool *p = par_create(2, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    par_set_spin(p, 100000);
    atomic_int seen[9];
    for (int i = 0; i < 9; i++) atomic_init(&seen[i], 0);
    par_run(p, mark_worker, seen);
    par_pause(p);
    double c0 = cpu_seconds();
    sleep_ms(100);
    double used = cpu_seconds() - c0;
    CHECK(used < 0.020);
    par_run(p, mark_worker, seen);      /* wakes the sleepers, clears the pause */
    par_run(p, mark_worker, seen);
    for (int w = 0; w < 2; w++) CHECK_INT(atomic_load(&seen[w]), 3);
    /* spinning again: the worker burns CPU while this thread sleeps. Polled against a wall bound rather than
     * measured over a fixed 50 ms, so a loaded machine (a spinning thread getting a fifth of a core) does not
     * fail it; a pool that stayed paused would use no CPU at all, however long it is given. */
    c0 = cpu_seconds();
    used = 0;
    for (int t = 0; t < 100 && used <= 0.015; t++) {   /* at most 100 x 10 ms */
        sleep_ms(10);
        used = cpu_seconds() - c0;
        if (t % 10 == 9) par_run(p, mark_worker, seen);   /* a fresh spin budget every 100 ms */
    }
    CHECK(used > 0.015);
    par_pause(NULL);
    par_destroy(p);
}

/* Stepping aside: with the caller pinned to core c0 and the worker pinned
 * (by a job of its own) to the same core, the next job finds the worker on
 * the caller's core; it must move off before running (it runs on another
 * core) and leave its affinity as wide as the pool's. Without step_aside the
 * worker would stay pinned on c0. Needs two allowed cores. */
typedef struct {
    int pin_to;                 /* >= 0: the worker pins itself there */
    int cpu;                    /* the worker's core while running the job */
    int mask_count;             /* cores in the worker's mask while running */
} aside_probe;

static void aside_job(void *ctx, int worker, int nworkers)
{
    aside_probe *a = ctx;
    (void)nworkers;
    if (worker != 1) return;
    if (a->pin_to >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(a->pin_to, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    cpu_set_t now;
    pthread_getaffinity_np(pthread_self(), sizeof now, &now);
    a->mask_count = CPU_COUNT(&now);
    a->cpu = sched_getcpu();
}

TEST(par_worker_steps_off_the_callers_core)
{
    cpu_set_t all;
    CHECK_INT(sched_getaffinity(0, sizeof all, &all), 0);
    if (CPU_COUNT(&all) < 2) {
        printf("     (one core allowed: nothing to step aside to)\n");
        return;
    }
    int c0 = -1;
    for (int c = 0; c < CPU_SETSIZE && c0 < 0; c++)
        if (CPU_ISSET(c, &all)) c0 = c;
    char err[100];
    par_pool *p = par_create(2, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c0, &one);
    CHECK_INT(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    aside_probe a = { c0, -1, 0 };
    par_run(p, aside_job, &a);          /* the worker pins itself to c0 */
    CHECK_INT(a.mask_count, 1);
    CHECK_INT(a.cpu, c0);
    a.pin_to = -1;
    par_run(p, aside_job, &a);          /* found on the caller's core: moves */
    CHECK(a.cpu != c0 && a.cpu >= 0);
    CHECK_INT(a.mask_count, CPU_COUNT(&all));
    CHECK_INT(pthread_setaffinity_np(pthread_self(), sizeof all, &all), 0);
    par_destroy(p);
}

/* Shutdown from every state: right after creation (workers spinning),
 * right after a job (spinning), and after the spin ran out (asleep). */
TEST(par_shutdown_while_spinning_or_asleep)
{
    atomic_int seen[9];
    for (int state = 0; state < 3; state++) {
        for (int nth = 2; nth <= 4; nth++) {
            char err[100];
            par_pool *p = par_create(nth, err, sizeof err);
            CHECK(p != NULL);
            if (!p) return;
            for (int i = 0; i < 9; i++) atomic_init(&seen[i], 0);
            if (state >= 1) par_run(p, mark_worker, seen);
            if (state == 2) sleep_ms(10);
            par_destroy(p);
            CHECK_INT(atomic_load(&seen[8]), state >= 1 ? nth * nth : 0);
        }
    }
}
