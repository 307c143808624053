/*
 * fuzz_regex.c -- libFuzzer target for sampling/regex.c: any bytes as a
 * trigger pattern (up to the first 0xFF byte) and the rest as the text;
 * a refusal must carry a reason, a compiled pattern is searched and matched
 * over the text, and the groups it reports must lie inside the text, in
 * order, inside the whole match.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/regex.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n > 512) return 0;
    const uint8_t *sep = memchr(d, 0xFF, n);
    size_t pl = sep ? (size_t)(sep - d) : n;
    const char *text = sep ? (const char *)sep + 1 : "";
    size_t tl = sep ? n - pl - 1 : 0;
    rx *r = NULL;
    char err[256];
    err[0] = 0;
    int rc = rx_compile((const char *)d, pl, &r, err, sizeof err);
    if (rc != RX_OK) {
        if (!err[0]) { fprintf(stderr, "refused without a reason\n"); abort(); }
        return 0;
    }
    size_t ng = rx_groups(r);
    long *g = malloc(2 * (ng + 1) * sizeof *g);
    if (!g) abort();
    for (int exact = 0; exact < 2; exact++) {
        int m = rx_exec(r, text, tl, exact, g);
        if (m != 1) continue;
        if (g[0] < 0 || g[1] < g[0] || (size_t)g[1] > tl) { fprintf(stderr, "bad match\n"); abort(); }
        if (exact && (g[0] != 0 || (size_t)g[1] != tl)) { fprintf(stderr, "exact match not whole\n"); abort(); }
        for (size_t k = 1; k <= ng; k++) {
            if (g[2 * k] == -1 && g[2 * k + 1] == -1) continue;
            if (g[2 * k] < 0 || g[2 * k + 1] < g[2 * k] || (size_t)g[2 * k + 1] > tl) {
                fprintf(stderr, "bad group %zu\n", k);
                abort();
            }
        }
    }
    free(g);
    rx_free(r);
    return 0;
}
