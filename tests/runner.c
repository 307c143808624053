/*
 * runner.c -- runs every TEST() linked into the binary, or those whose name
 * contains one of the arguments. Exit 0 when nothing failed.
 */
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>

#define MAX_TESTS 4096

static struct { const char *name, *file; test_fn fn; } tests[MAX_TESTS];
static int n_tests;
static int cur_failed, cur_skipped;
static char skip_reason[512];

void test_register(const char *name, const char *file, test_fn fn)
{
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "runner: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    tests[n_tests].name = name;
    tests[n_tests].file = file;
    tests[n_tests].fn = fn;
    n_tests++;
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    if (cur_failed++ >= 10) return;   /* the first ten are enough to read */
    fprintf(stdout, "    %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

void test_skip(const char *fmt, ...)
{
    va_list ap;
    cur_skipped = 1;
    va_start(ap, fmt);
    vsnprintf(skip_reason, sizeof skip_reason, fmt, ap);
    va_end(ap);
}

const char *test_shared(const char *rel)
{
    static char buf[8][4096];
    static int slot;
    const char *root = getenv("BANKML_SHARED");
    struct stat st;
    char *p = buf[slot++ % 8];
    snprintf(p, 4096, "%s/%s", root && *root ? root : "../shared", rel);
    return stat(p, &st) == 0 ? p : NULL;
}

char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;
    if (!f) return NULL;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            char *nb;
            cap = cap ? cap * 2 : 131072;
            nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n_tests; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc && !want; a++)
            want = strstr(tests[i].name, argv[a]) != NULL;
        if (!want) continue;
        cur_failed = cur_skipped = 0;
        fflush(stdout);
        tests[i].fn();
        if (cur_failed) {
            printf("FAIL %s (%s)\n", tests[i].name, tests[i].file);
            failed++;
        } else if (cur_skipped) {
            printf("skip %s: %s\n", tests[i].name, skip_reason);
            skipped++;
        } else {
            printf("ok   %s\n", tests[i].name);
            passed++;
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
