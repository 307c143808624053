/*
 * test.h -- the unit-test harness: TEST() registers a function at load time,
 * CHECK*() record failures without stopping the process, SKIP() marks a test
 * that cannot run here (a missing file from ../shared, say) with its reason.
 *
 * The runner (tests/runner.c) prints one line per test and, last, the line
 * "N passed, N failed, N skipped" that CI reads.
 */
#ifndef BANKML_TEST_H
#define BANKML_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);

void test_register(const char *name, const char *file, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Path of a file under ../shared (or $BANKML_SHARED); NULL if it is absent. */
const char *test_shared(const char *rel);
/* Reads a whole file into a malloc'd buffer (NUL-terminated); NULL on error. */
char *test_read_file(const char *path, size_t *len);

#define TEST(name)                                                     \
    static void name(void);                                            \
    __attribute__((constructor)) static void test_reg_##name(void) {   \
        test_register(#name, __FILE__, name);                          \
    }                                                                  \
    static void name(void)

#define CHECK(cond)                                                    \
    do { if (!(cond)) test_fail(__FILE__, __LINE__, "%s", #cond); } while (0)

#define CHECK_INT(got, want)                                           \
    do {                                                               \
        long long g_ = (long long)(got), w_ = (long long)(want);       \
        if (g_ != w_)                                                  \
            test_fail(__FILE__, __LINE__, "%s = %lld, want %lld",      \
                      #got, g_, w_);                                   \
    } while (0)

#define CHECK_U64(got, want)                                           \
    do {                                                               \
        unsigned long long g_ = (got), w_ = (want);                    \
        if (g_ != w_)                                                  \
            test_fail(__FILE__, __LINE__, "%s = %llu, want %llu",      \
                      #got, g_, w_);                                   \
    } while (0)

#define CHECK_STR(got, want)                                           \
    do {                                                               \
        const char *g_ = (got), *w_ = (want);                          \
        if (!g_ || !w_ || strcmp(g_, w_) != 0)                         \
            test_fail(__FILE__, __LINE__, "%s = \"%s\", want \"%s\"",  \
                      #got, g_ ? g_ : "(null)", w_ ? w_ : "(null)");   \
    } while (0)

#define CHECK_MEM(got, want, n)                                        \
    do {                                                               \
        if (memcmp((got), (want), (n)) != 0)                           \
            test_fail(__FILE__, __LINE__, "%s differs from %s",        \
                      #got, #want);                                    \
    } while (0)

#define SKIP(...) do { test_skip(__VA_ARGS__); return; } while (0)

#endif
