/*
 * test_sha256.c -- SHA-256: the FIPS 180-4 vectors on both paths, the SHA-NI
 * rounds against the portable ones on every short length and on split
 * updates, and sha256_file against coreutils sha256sum on the shared models.
 *
 * Expected digests of the pseudo-random data were computed with Python's
 * hashlib over the same xorshift32 stream (see fill_prng).
 */
#include "test.h"
#include "base/sha256.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define BIG 69999

/* Deterministic bytes: xorshift32 from a fixed seed, the top byte of each
 * state. Python: s ^= s<<13; s ^= s>>17; s ^= s<<5 (32-bit), byte s>>24. */
static const uint8_t *prng_data(void)
{
    static uint8_t buf[BIG];
    static int done;
    if (!done) {
        uint32_t s = 0x9E3779B9u;
        for (size_t i = 0; i < BIG; i++) {
            s ^= s << 13; s ^= s >> 17; s ^= s << 5;
            buf[i] = (uint8_t)(s >> 24);
        }
        done = 1;
    }
    return buf;
}

static const char *hex_of(const uint8_t d[32])
{
    static char hex[4][65];
    static int slot;
    char *h = hex[slot++ % 4];
    sha256_hex(d, h);
    return h;
}

static const char *hash_hex(const void *p, size_t n)
{
    uint8_t d[32];
    sha256(p, n, d);
    return hex_of(d);
}

/* Selecting a path for one test and putting the previous choice back. */
static int saved_hw;
static void use_path(int portable)
{
    saved_hw = sha256_hw_active();
    sha256_force_portable(portable);
}
static void restore_path(void) { sha256_force_portable(!saved_hw); }

#define NEED_HW() \
    do { if (!sha256_hw_available()) SKIP("no SHA-NI here (CPU or build)"); } while (0)

/* ---- FIPS 180-4 vectors ---- */

static void check_vectors(void)
{
    static const char m448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    static const char m896[] = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                               "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    CHECK_INT(sizeof m448 - 1, 56);
    CHECK_INT(sizeof m896 - 1, 112);
    CHECK_STR(hash_hex("", 0),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK_STR(hash_hex(NULL, 0),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK_STR(hash_hex("abc", 3),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_STR(hash_hex(m448, 56),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK_STR(hash_hex(m896, 112),
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

    /* One million 'a' in 1,000-byte updates. */
    char a[1000];
    sha256_ctx c;
    uint8_t d[32];
    memset(a, 'a', sizeof a);
    sha256_init(&c);
    for (int i = 0; i < 1000; i++) sha256_update(&c, a, sizeof a);
    CHECK_U64(c.total, 1000000);
    sha256_final(&c, d);
    CHECK_STR(hex_of(d), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(sha256_fips_vectors_portable)
{
    use_path(1);
    CHECK_INT(sha256_hw_active(), 0);
    check_vectors();
    restore_path();
}

TEST(sha256_fips_vectors_hw)
{
    NEED_HW();
    use_path(0);
    CHECK_INT(sha256_hw_active(), 1);
    check_vectors();
    restore_path();
}

TEST(sha256_hex_lowercase)
{
    uint8_t d[32];
    char hex[66];
    for (int i = 0; i < 32; i++) d[i] = (uint8_t)(i * 8 + 7);
    memset(hex, 'X', sizeof hex);
    sha256_hex(d, hex);
    CHECK_STR(hex, "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff");
    CHECK_INT(hex[65], 'X');   /* writes exactly 65 bytes */
}

/* ---- pseudo-random data, both paths ---- */

/* sha256 over the 1,001 digests of data[0..n) for n = 0..1000: one literal
 * that pins every short length, padding edge (55/56/63/64 mod 64) included. */
static const char *lengths_digest(uint8_t all[1001][32])
{
    const uint8_t *data = prng_data();
    for (size_t n = 0; n <= 1000; n++) sha256(data, n, all[n]);
    return hash_hex(all, sizeof(uint8_t[1001][32]));
}

#define LENGTHS_DIGEST "8affcb68214599a9dbe76c475e616f9805f6291e0da0c75a1e7796f591817d05"

static const struct { size_t n; const char *hex; } big_lengths[] = {
    {4095, "51f85ec3fcfd98cb15d17e50c5e952e3aef417d791fb1fafbe4d0a0f44d9e62b"},
    {4096, "3fe51af55a3a3c46173f84e70dc72d967fa11c2fab8e11a137506f00a82a7ab8"},
    {4097, "f2d63b7a3d22ce43a443d1111c25f28fb8e2c8fcddfc6c2d3bca90096cf23448"},
    {65536, "562ad15077f71a0121e34cf29b263ec7db542a555828eeffd33ce8d428b5f7c3"},
    {69999, "d5514550e6111fca220fa660dcbdfcf88e84f272349215da0a30f0af6c4c0010"},
};

TEST(sha256_lengths_portable)
{
    static uint8_t all[1001][32];
    use_path(1);
    CHECK_STR(lengths_digest(all), LENGTHS_DIGEST);
    for (size_t i = 0; i < sizeof big_lengths / sizeof big_lengths[0]; i++)
        CHECK_STR(hash_hex(prng_data(), big_lengths[i].n), big_lengths[i].hex);
    restore_path();
}

TEST(sha256_hw_equals_portable_lengths)
{
    static uint8_t sw[1001][32], hw[1001][32];
    NEED_HW();
    use_path(1);
    CHECK_STR(lengths_digest(sw), LENGTHS_DIGEST);
    sha256_force_portable(0);
    CHECK_STR(lengths_digest(hw), LENGTHS_DIGEST);
    for (size_t n = 0; n <= 1000; n++)
        if (memcmp(sw[n], hw[n], 32) != 0) {
            test_fail(__FILE__, __LINE__, "length %zu: hw %s != portable %s", n,
                      hex_of(hw[n]), hex_of(sw[n]));
            break;
        }
    for (size_t i = 0; i < sizeof big_lengths / sizeof big_lengths[0]; i++) {
        uint8_t a[32], b[32];
        sha256_force_portable(1);
        sha256(prng_data(), big_lengths[i].n, a);
        sha256_force_portable(0);
        sha256(prng_data(), big_lengths[i].n, b);
        CHECK_STR(hex_of(a), big_lengths[i].hex);
        CHECK_STR(hex_of(b), big_lengths[i].hex);
    }
    restore_path();
}

/* Split updates: every two-way cut of 4,097 bytes, three-way cuts of 1,000
 * bytes, one byte at a time, and irregular chunk sizes over 69,999 bytes.
 * Each must give the one-shot literal. Returns the number of mismatches. */
static int check_splits(void)
{
    const uint8_t *data = prng_data();
    int bad = 0;
    uint8_t d[32], one[32];
    sha256_ctx c;

    for (size_t cut = 0; cut <= 4097; cut++) {
        sha256_init(&c);
        sha256_update(&c, data, cut);
        sha256_update(&c, data + cut, 4097 - cut);
        sha256_final(&c, d);
        if (strcmp(hex_of(d), big_lengths[2].hex) != 0 && bad++ < 3)
            test_fail(__FILE__, __LINE__, "two-way cut at %zu", cut);
    }

    sha256(data, 1000, one);
    for (size_t a = 0; a <= 1000; a += 7)
        for (size_t b = a; b <= 1000; b += 13) {
            sha256_init(&c);
            sha256_update(&c, data, a);
            sha256_update(&c, data + a, b - a);
            sha256_update(&c, data + b, 1000 - b);
            sha256_final(&c, d);
            if (memcmp(d, one, 32) != 0 && bad++ < 3)
                test_fail(__FILE__, __LINE__, "three-way cut at %zu, %zu", a, b);
        }

    sha256_init(&c);
    for (size_t i = 0; i < 4096; i++) sha256_update(&c, data + i, 1);
    sha256_final(&c, d);
    if (strcmp(hex_of(d), big_lengths[1].hex) != 0 && bad++ < 3)
        test_fail(__FILE__, __LINE__, "byte-at-a-time");

    static const size_t steps[] = {1, 63, 64, 65, 127, 128, 129, 0, 3, 1000, 4096, 55, 56, 57};
    size_t off = 0, k = 0;
    sha256_init(&c);
    while (off < BIG) {
        size_t n = steps[k++ % (sizeof steps / sizeof steps[0])];
        if (n > BIG - off) n = BIG - off;
        sha256_update(&c, data + off, n);
        off += n;
    }
    sha256_final(&c, d);
    if (strcmp(hex_of(d), big_lengths[4].hex) != 0 && bad++ < 3)
        test_fail(__FILE__, __LINE__, "irregular chunks");
    return bad;
}

TEST(sha256_split_updates_portable)
{
    use_path(1);
    CHECK_INT(check_splits(), 0);
    restore_path();
}

TEST(sha256_split_updates_hw)
{
    NEED_HW();
    use_path(0);
    CHECK_INT(check_splits(), 0);
    restore_path();
}

TEST(sha256_force_portable_switches)
{
    use_path(1);
    CHECK_INT(sha256_hw_active(), 0);
    sha256_force_portable(0);
    CHECK_INT(sha256_hw_active(), sha256_hw_available());
    /* A context keeps the path it was init'ed with. */
    sha256_ctx c;
    sha256_init(&c);
    CHECK_INT(c.portable, !sha256_hw_available());
    sha256_force_portable(1);
    CHECK_INT(c.portable, !sha256_hw_available());
    uint8_t d[32];
    sha256_update(&c, "abc", 3);
    sha256_final(&c, d);
    CHECK_STR(hex_of(d), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    restore_path();
}

/* ---- files ---- */

static const struct { const char *rel, *hex; } models[] = {
    /* sha256sum ../shared/models/... on the day these tests were written */
    {"models/stories260K.gguf", "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"},
    {"models/llama-2-tiny-random.gguf", "81f226c62d28ed4a1a9b9fa080fcd9f0cc40e0f9d5680036583ff98fbcd035cb"},
};

static void check_models(void)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const char *p = test_shared(models[i].rel);
        uint8_t d[32];
        if (!p) SKIP("../shared/%s is absent", models[i].rel);
        CHECK_INT(sha256_file(p, d), 0);
        CHECK_STR(hex_of(d), models[i].hex);
    }
}

TEST(sha256_file_models_portable)
{
    use_path(1);
    check_models();
    restore_path();
}

TEST(sha256_file_models_hw)
{
    NEED_HW();
    use_path(0);
    check_models();
    restore_path();
}

TEST(sha256_file_small_and_empty)
{
    char path[] = "/tmp/bankml-sha256-XXXXXX";
    int fd = mkstemp(path);
    uint8_t d[32];
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK_INT(sha256_file(path, d), 0);
    CHECK_STR(hex_of(d), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK_INT(write(fd, prng_data(), BIG), BIG);
    close(fd);
    CHECK_INT(sha256_file(path, d), 0);
    CHECK_STR(hex_of(d), big_lengths[4].hex);
    unlink(path);
}

TEST(sha256_file_errors)
{
    uint8_t d[32];
    errno = 0;
    CHECK_INT(sha256_file("/tmp/bankml-no-such-dir/no-such-file.gguf", d), -1);
    CHECK_INT(errno, ENOENT);
    errno = 0;
    CHECK_INT(sha256_file("/tmp", d), -1);   /* a directory: read(2) fails */
    CHECK_INT(errno, EISDIR);
}
