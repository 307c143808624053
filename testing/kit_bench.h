/*
 * kit_bench.h -- how the kernel benchmarks (kit_kernels_quant.c,
 * kit_kernels_f16.c) time a product of ours against ggml's on two pools.
 *
 * In blocks: BENCH_WARM untimed then BENCH_BLOCK timed runs of one side,
 * then the same of the other; the paired ratio pairs run i of a block with
 * run i of the other side's block. Each side's pool is alone and awake, as
 * in a server between the products of one token: ggml's is paused
 * (ggml_threadpool_pause) during our block and resumed for its own, ours
 * paused (par_pause) during theirs and woken (bench_wake) before our own.
 *
 * Why: run by run, ggml's workers (which poll about 200 ms after a compute
 * here: 1024 * 128 * poll pauses) sat on the core our worker needed. And a
 * woken worker of ours took over 100 us at times to run: longer than a whole
 * block of small products, which then ran on the caller alone, while ggml's
 * first compute of a block waits at its barrier for its freshly resumed
 * workers. bench_wake is that barrier's counterpart.
 */
#ifndef BANKML_KIT_BENCH_H
#define BANKML_KIT_BENCH_H

#include "base/par.h"

#define BENCH_BLOCK 3
#define BENCH_WARM 2

static void bench_empty_job(void *ctx, int worker, int nworkers)
{
    (void)ctx;
    (void)worker;
    (void)nworkers;
}

/* Returns once every worker of pool has run an empty job (par_run waits
 * for all of them). */
static inline void bench_wake(par_pool *pool)
{
    par_run(pool, bench_empty_job, NULL);
}

#endif
