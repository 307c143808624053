/*
 * base.h -- the small helpers every layer shares, defined once: the error
 * convention and the clocks.
 *
 * Errors: a function that can fail on input returns a status and writes a
 * one-line reason a user can act on into the caller's buffer (err, errlen
 * bytes). err may be NULL or errlen 0: the reason is then dropped.
 */
#ifndef BANKML_BASE_H
#define BANKML_BASE_H

#include <stddef.h>
#include <stdint.h>

/* printf into err[0..errlen), always NUL-terminated, cut to fit; nothing
 * when err is NULL or errlen is 0. */
void bk_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Grows *p (elements of size sz) to hold at least need elements; the
 * capacity doubles from 16, so appends stay amortised O(1). 0, or -1 on
 * overflow or out of memory (the old block is kept). */
int bk_grow(void **p, size_t *cap, size_t need, size_t sz);

/* The value of a hex digit, or -1. */
int bk_hexval(int c);

/* 1 when the CPU has F16C (cpuid leaf 1, ECX bit 29; 0 off x86). Asked of
 * cpuid directly: clang 14 (Debian 12's) does not know
 * __builtin_cpu_supports("f16c"). */
int bk_cpu_f16c(void);

/* CLOCK_MONOTONIC in ns and in us: timings, deadlines, keep-alive expiry. */
int64_t bk_mono_ns(void);
int64_t bk_mono_us(void);
/* CLOCK_REALTIME in ns since the Unix epoch: timestamps in answers. */
int64_t bk_wall_ns(void);

#endif
