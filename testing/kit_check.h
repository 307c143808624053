/*
 * kit_check.h -- what the in-process kernel oracles (kit_kernels_quant.c, kit_kernels_kquant.c,
 * kit_kernels_iq.c) share: a splitmix64 stream seeded by KIT_SEED (each kit its own), uniform and roughly
 * normal floats, float bits, the case counters and the bit-for-bit comparisons that print the first misses.
 * Included once by each kit, after <stdint.h>, <stdio.h>, <string.h>; every name is static.
 */
#ifndef BANKML_KIT_CHECK_H
#define BANKML_KIT_CHECK_H

#ifndef KIT_SEED
#error "define KIT_SEED (the kit's random stream) before including kit_check.h"
#endif

static uint64_t rng = KIT_SEED;

static uint64_t next64(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float uni(void) { return (float)((next64() >> 40) * (1.0 / 16777216.0)); } /* [0,1) */

/* Roughly normal, times a scale that varies per call site. */
static float gauss(void) { return (uni() + uni() + uni() + uni() - 2.0f) * 1.7f; }

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static long passed, failed, skipped;

/* A case passes when every element matches; prints the first few misses. */
static void verdict(const char *name, long bad, long total)
{
    if (bad) {
        failed++;
        printf("FAIL %s: %ld of %ld elements differ\n", name, bad, total);
    } else {
        passed++;
    }
}

static long cmp_f32(const char *name, const float *got, const float *want, size_t n)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (fbits(got[i]) != fbits(want[i])) {
            if (bad < 4)
                printf("  %s [%zu]: ours %.9g (%08x) ggml %.9g (%08x)\n", name, i, got[i],
                       fbits(got[i]), want[i], fbits(want[i]));
            bad++;
        }
    }
    return bad;
}

static long cmp_bytes(const char *name, const uint8_t *got, const uint8_t *want, size_t n)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            if (bad < 4)
                printf("  %s byte %zu: ours %02x ggml %02x\n", name, i, got[i], want[i]);
            bad++;
        }
    }
    return bad;
}

#endif
