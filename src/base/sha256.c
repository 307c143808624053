/*
 * sha256.c -- FIPS 180-4 SHA-256, streaming, with two compressors that give
 * the same digest: the x86-64 SHA extensions (SHA-NI) and portable C.
 *
 * Why two: the pin hashes the whole model before every load, so a 1 GB file
 * costs seconds in portable C and a fraction of that with SHA-NI. The
 * portable rounds stay as the reference the hardware path is tested against
 * and as the only path on other CPUs (and when BANKML_NO_SHANI is set).
 *
 * Both compressors take a run of whole 64-byte blocks, so sha256_update()
 * hands every whole block of one call over at once and only the tail is
 * copied into the context's partial block.
 */
#include "base/sha256.h"
#include "base/progress.h"

#include <stdio.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The SHA-NI path needs x86-64 and gcc/clang target attributes. Building
 * with -DBANKML_SHA256_PORTABLE_ONLY leaves it out, as on other CPUs (this
 * is how the non-x86 branch is compiled and tested on an x86 machine). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(BANKML_SHA256_PORTABLE_ONLY)
#define SHA256_HAVE_SHANI 1
#include <immintrin.h>
#if defined(__clang__)
#include <cpuid.h>
#endif
#else
#define SHA256_HAVE_SHANI 0
#endif

/* FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the
 * cube roots of the first 64 primes. 16-byte aligned for the SHA-NI loads. */
static const uint32_t K[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* ---- portable rounds ---- */

static uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);  p[3] = (uint8_t)v;
}

/* The compression function of FIPS 180-4 section 6.2.2 over nblocks blocks,
 * written plainly: a 64-word schedule, then 64 rounds. It is the reference
 * the SHA-NI path is checked against, so clarity wins over speed here. */
static void compress_portable(uint32_t h[8], const uint8_t *p, size_t nblocks)
{
    uint32_t w[64];
    for (; nblocks; nblocks--, p += 64) {
        for (int t = 0; t < 16; t++) w[t] = load_be32(p + 4 * t);
        for (int t = 16; t < 64; t++) {
            uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
            uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
            w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
        uint32_t e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int t = 0; t < 64; t++) {
            uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
            uint32_t ch = (e & f) ^ (~e & g);
            uint32_t t1 = hh + S1 + ch + K[t] + w[t];
            uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
            uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
            uint32_t t2 = S0 + maj;
            hh = g; g = f; f = e; e = d + t1;
            d = c; c = b; b = a; a = t1 + t2;
        }
        h[0] += a; h[1] += b; h[2] += c; h[3] += d;
        h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    }
}

/* ---- SHA-NI rounds (x86-64) ---- */

#if SHA256_HAVE_SHANI
/*
 * The SHA extensions keep the eight working variables in two registers laid
 * out as Intel's reference does: one holds A,B,E,F and the other C,D,G,H
 * (most significant lane first). sha256rnds2 runs two rounds taking the
 * message+constant words from the low 64 bits of its third operand, so each
 * group of four rounds calls it twice, the second time with the high half
 * moved down. The schedule words W[t] are made four at a time:
 *   W[g] = msg2(msg1(W[g-4], W[g-3]) + (W[g-1]:W[g-2] >> 32 bits), W[g-1])
 * where msg1 adds sigma0, the shifted pair supplies W[t-7] and msg2 adds
 * sigma1. Four registers rotate through the sixteen groups.
 */
#define SHANI_4ROUNDS(msg, kidx)                                             \
    do {                                                                     \
        __m128i mk_ = _mm_add_epi32((msg),                                   \
                                    _mm_load_si128((const __m128i *)&K[kidx])); \
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, mk_);                       \
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(mk_, 0x0E)); \
    } while (0)

#define SHANI_SCHEDULE(w4, w3, w2, w1)                                       \
    (w4) = _mm_sha256msg2_epu32(                                             \
        _mm_add_epi32(_mm_sha256msg1_epu32((w4), (w3)),                      \
                      _mm_alignr_epi8((w1), (w2), 4)),                       \
        (w1))

__attribute__((target("sha,sse4.1,ssse3")))
static void compress_shani(uint32_t h[8], const uint8_t *p, size_t nblocks)
{
    /* Each 32-bit big-endian message word is byte-reversed into its lane. */
    const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11,
                                       4, 5, 6, 7, 0, 1, 2, 3);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&h[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);

    for (; nblocks; nblocks--, p += 64) {
        __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i w0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 0)), bswap);
        __m128i w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16)), bswap);
        __m128i w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 32)), bswap);
        __m128i w3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 48)), bswap);

        SHANI_4ROUNDS(w0, 0);
        SHANI_4ROUNDS(w1, 4);
        SHANI_4ROUNDS(w2, 8);
        SHANI_4ROUNDS(w3, 12);
        for (int r = 16; r < 64; r += 16) {
            SHANI_SCHEDULE(w0, w1, w2, w3); SHANI_4ROUNDS(w0, r);
            SHANI_SCHEDULE(w1, w2, w3, w0); SHANI_4ROUNDS(w1, r + 4);
            SHANI_SCHEDULE(w2, w3, w0, w1); SHANI_4ROUNDS(w2, r + 8);
            SHANI_SCHEDULE(w3, w0, w1, w2); SHANI_4ROUNDS(w3, r + 12);
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }

    /* Back from ABEF/CDGH to h[0..7] in memory order. */
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}

#undef SHANI_4ROUNDS
#undef SHANI_SCHEDULE

/* Does this CPU have SHA, SSE4.1 and SSSE3? gcc's __builtin_cpu_supports
 * reads libgcc's CPU model, which works in a -static glibc binary once
 * __builtin_cpu_init() has run (it is cheap and safe to call again). clang
 * 14 does not know the "sha" feature name, so there we ask CPUID directly. */
static int cpu_has_shani(void)
{
#if defined(__clang__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int ssse3 = (c >> 9) & 1, sse41 = (c >> 19) & 1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return ssse3 && sse41 && ((b >> 29) & 1);
#else
    __builtin_cpu_init();
    return __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") &&
           __builtin_cpu_supports("ssse3");
#endif
}
#else
static int cpu_has_shani(void) { return 0; }
#endif /* SHA256_HAVE_SHANI */

/* ---- choosing the path ----
 *
 * Decided once, on first use, then kept in an atomic so that threads hashing
 * at the same time read one answer: the CPU does not change under us, and
 * the environment is read once so that a later setenv() cannot make two
 * hashes of one file take different paths. Two threads racing on the first
 * use compute the same value, so the race is harmless. */
enum { MODE_UNSET = 0, MODE_HW = 1, MODE_PORTABLE = 2 };
static int g_mode;          /* MODE_*, accessed with __atomic builtins */
static int g_cpu = -1;      /* cpu_has_shani(), cached */

static int cpu_cached(void)
{
    int c = __atomic_load_n(&g_cpu, __ATOMIC_ACQUIRE);
    if (c < 0) {
        c = cpu_has_shani();
        __atomic_store_n(&g_cpu, c, __ATOMIC_RELEASE);
    }
    return c;
}

static int mode(void)
{
    int m = __atomic_load_n(&g_mode, __ATOMIC_ACQUIRE);
    if (m == MODE_UNSET) {
        const char *e = getenv("BANKML_NO_SHANI");
        int off = e && *e && strcmp(e, "0") != 0;
        m = (!off && cpu_cached()) ? MODE_HW : MODE_PORTABLE;
        __atomic_store_n(&g_mode, m, __ATOMIC_RELEASE);
    }
    return m;
}

int sha256_hw_active(void) { return mode() == MODE_HW; }

int sha256_hw_available(void) { return cpu_cached(); }

void sha256_force_portable(int on)
{
    int m = (!on && cpu_cached()) ? MODE_HW : MODE_PORTABLE;
    __atomic_store_n(&g_mode, m, __ATOMIC_RELEASE);
}

static void compress(sha256_ctx *c, const uint8_t *p, size_t nblocks)
{
#if SHA256_HAVE_SHANI
    if (!c->portable) { compress_shani(c->h, p, nblocks); return; }
#endif
    compress_portable(c->h, p, nblocks);
}

/* ---- streaming interface ---- */

void sha256_init(sha256_ctx *c)
{
    /* FIPS 180-4 section 5.3.3: square roots of the first 8 primes. */
    static const uint32_t iv[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(c->h, iv, sizeof iv);
    c->total = 0;
    c->nbuf = 0;
    c->portable = mode() != MODE_HW;
}

void sha256_update(sha256_ctx *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    if (n == 0) return;        /* data may be NULL when n is 0 */
    c->total += n;
    if (c->nbuf) {
        size_t take = 64 - c->nbuf;
        if (take > n) take = n;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take; p += take; n -= take;
        if (c->nbuf < 64) return;
        compress(c, c->buf, 1);
        c->nbuf = 0;
    }
    if (n >= 64) {
        size_t whole = n / 64;
        compress(c, p, whole);
        p += whole * 64; n -= whole * 64;
    }
    if (n) {
        memcpy(c->buf, p, n);
        c->nbuf = n;
    }
}

void sha256_final(sha256_ctx *c, uint8_t out[32])
{
    /* Padding (section 5.1.1): 0x80, zeros to 56 mod 64, then the message
     * length in bits as a big-endian 64-bit number. */
    uint64_t bits = c->total * 8;
    c->buf[c->nbuf++] = 0x80;
    if (c->nbuf > 56) {
        memset(c->buf + c->nbuf, 0, 64 - c->nbuf);
        compress(c, c->buf, 1);
        c->nbuf = 0;
    }
    memset(c->buf + c->nbuf, 0, 56 - c->nbuf);
    store_be32(c->buf + 56, (uint32_t)(bits >> 32));
    store_be32(c->buf + 60, (uint32_t)bits);
    compress(c, c->buf, 1);
    for (int i = 0; i < 8; i++) store_be32(out + 4 * i, c->h[i]);
    memset(c, 0, sizeof *c);   /* a finished context must be init'ed again */
}

void sha256(const void *data, size_t n, uint8_t out[32])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_final(&c, out);
}

void sha256_hex(const uint8_t digest[32], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = 0;
}

/* 1 MiB reads: large enough that the read(2) calls cost nothing next to the
 * hashing, small enough to stay in L2/L3 between the copy and the rounds. */
#define SHA256_FILE_CHUNK ((size_t)1 << 20)

int sha256_file(const char *path, uint8_t out[32])
{
    int fd, saved;
    uint8_t *buf;
    sha256_ctx c;

    do fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return -1;
    buf = malloc(SHA256_FILE_CHUNK);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    sha256_init(&c);
    struct stat st;
    char label[200];
    const char *base = strrchr(path, '/');
    snprintf(label, sizeof label, "hashing %s", base ? base + 1 : path);
    int pg = bk_progress_begin(label, fstat(fd, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0, "B");
    uint64_t done = 0;
    for (;;) {
        ssize_t got = read(fd, buf, SHA256_FILE_CHUNK);
        if (got < 0) {
            if (errno == EINTR) continue;
            saved = errno;
            bk_progress_end(pg);
            free(buf);
            close(fd);
            errno = saved;
            return -1;
        }
        if (got == 0) break;
        sha256_update(&c, buf, (size_t)got);
        done += (uint64_t)got;
        bk_progress_update(pg, done);
    }
    bk_progress_end(pg);
    free(buf);
    close(fd);
    sha256_final(&c, out);
    return 0;
}
