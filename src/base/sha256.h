/*
 * sha256.h -- FIPS 180-4 SHA-256, streaming.
 *
 * On x86-64 the SHA-NI rounds are used when the CPU has SHA, SSE4.1 and SSSE3
 * (checked once); BANKML_NO_SHANI=1 in the environment forces the portable
 * rounds. Both give the same digest.
 */
#ifndef BANKML_SHA256_H
#define BANKML_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t total;         /* bytes hashed so far */
    uint8_t buf[64];        /* a partial block */
    size_t nbuf;
    int portable;           /* 1: the portable rounds for this context */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
void sha256_final(sha256_ctx *c, uint8_t out[32]);
/* One-shot helpers. hex must have room for 65 bytes (lowercase, NUL-ended). */
void sha256(const void *data, size_t n, uint8_t out[32]);
void sha256_hex(const uint8_t digest[32], char hex[65]);
/* Hashes a whole file in 1 MiB reads. Returns 0, or -1 with errno set. */
int sha256_file(const char *path, uint8_t out[32]);
/* 1 when the SHA-NI path is in use (CPU has it and BANKML_NO_SHANI is unset).
 * BANKML_NO_SHANI counts as set when it is non-empty and not "0"; it is read
 * once, on the first hash or query. */
int sha256_hw_active(void);
/* Forces the choice for tests: 1 portable, 0 hardware when available. It
 * overrides BANKML_NO_SHANI and applies to contexts init'ed afterwards (a
 * context keeps the path it was init'ed with). */
void sha256_force_portable(int on);
/* 1 when the CPU has SHA, SSE4.1 and SSSE3 (whatever BANKML_NO_SHANI says);
 * always 0 off x86-64. */
int sha256_hw_available(void);

#endif
