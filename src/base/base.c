/* base.c -- see base.h. */
#include "base/base.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>

void bk_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || !errlen) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int bk_hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int bk_grow(void **p, size_t *cap, size_t need, size_t sz)
{
    size_t nc;
    void *q;
    if (need <= *cap) return 0;
    nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return -1;
        nc *= 2;
    }
    if (nc > SIZE_MAX / sz) return -1;
    q = realloc(*p, nc * sz);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t bk_mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
int64_t bk_mono_us(void) { return clock_ns(CLOCK_MONOTONIC) / 1000; }
int64_t bk_wall_ns(void) { return clock_ns(CLOCK_REALTIME); }

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
int bk_cpu_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_F16C) != 0;
}
#else
int bk_cpu_f16c(void) { return 0; }
#endif
