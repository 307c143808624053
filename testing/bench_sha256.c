/*
 * bench_sha256.c -- throughput of sha256_file() on one file, SHA-NI and
 * portable, hot page cache, best of 3 timed runs per path.
 *
 *   bench_sha256 FILE
 *
 * One untimed run first pulls the file into the page cache, so the figures
 * are the hashing (plus read(2) copies), not the disk. Prints one line per
 * path: "<path> <bytes> bytes best <s> s <MB/s> MB/s <hex>" (MB = 10^6 B).
 * Exit 1 when the two paths disagree or the file cannot be hashed.
 */
#include "base/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best of three timed hashes; fills hex with the digest. -1 on error. */
static double best_of_3(const char *path, char hex[65])
{
    double best = -1;
    for (int i = 0; i < 3; i++) {
        uint8_t d[32];
        double t0 = now();
        if (sha256_file(path, d) != 0) return -1;
        double t = now() - t0;
        if (best < 0 || t < best) best = t;
        sha256_hex(d, hex);
    }
    return best;
}

int main(int argc, char **argv)
{
    struct stat st;
    uint8_t d[32];
    char hex_hw[65] = "", hex_sw[65] = "";
    int env_hw = sha256_hw_active();   /* what BANKML_NO_SHANI left us */

    if (argc != 2) {
        fprintf(stderr, "usage: bench_sha256 FILE\n");
        return 1;
    }
    if (stat(argv[1], &st) != 0 || sha256_file(argv[1], d) != 0) {   /* warm-up */
        fprintf(stderr, "bench_sha256: cannot hash %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    printf("file %s, %lld bytes; SHA-NI available %d, active at start %d\n",
           argv[1], (long long)st.st_size, sha256_hw_available(), env_hw);

    double mb = (double)st.st_size / 1e6;
    if (sha256_hw_available()) {
        sha256_force_portable(0);
        double t = best_of_3(argv[1], hex_hw);
        if (t < 0) { perror("sha256_file"); return 1; }
        printf("sha-ni   best %.3f s  %7.0f MB/s  %s\n", t, mb / t, hex_hw);
    }
    sha256_force_portable(1);
    double t = best_of_3(argv[1], hex_sw);
    if (t < 0) { perror("sha256_file"); return 1; }
    printf("portable best %.3f s  %7.0f MB/s  %s\n", t, mb / t, hex_sw);

    if (hex_hw[0] && strcmp(hex_hw, hex_sw) != 0) {
        fprintf(stderr, "bench_sha256: SHA-NI and portable digests differ\n");
        return 1;
    }
    return 0;
}
