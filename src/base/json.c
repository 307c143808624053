/*
 * json.c -- a strict RFC 8259 parser and the small writer the servers use.
 *
 * See json.h for the contract. This file has two halves: the writer (jbuf and
 * the string escaper), which everything that answers over HTTP links against,
 * and the parser, which turns a request body into a tree.
 */
#include "base/json.h"

#include <errno.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --------------------------------------------------------------------------
// writer

void jbuf_init(jbuf *b)
{
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

void jbuf_free(jbuf *b)
{
    free(b->p);
    jbuf_init(b);
}

/* Keeps the allocation so a server loop can reuse one buffer per response. */
void jbuf_reset(jbuf *b)
{
    b->len = 0;
    b->oom = 0;
    if (b->p) b->p[0] = 0;
}

/* Makes room for `more` bytes plus the NUL. Once an allocation fails the
 * buffer stays in the oom state, so a caller checks once at the end instead
 * of after every write. */
static int jbuf_reserve(jbuf *b, size_t more)
{
    size_t need, cap;
    char *np;
    if (b->oom) return 0;
    if (more > SIZE_MAX - 1 - b->len) { b->oom = 1; return 0; }
    need = b->len + more + 1;
    if (need <= b->cap) return 1;
    cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) { cap = need; break; }
        cap *= 2;
    }
    np = realloc(b->p, cap);
    if (!np) { b->oom = 1; return 0; }
    b->p = np;
    b->cap = cap;
    return 1;
}

void jbuf_put(jbuf *b, const void *s, size_t n)
{
    if (!jbuf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void jbuf_puts(jbuf *b, const char *s)
{
    jbuf_put(b, s, strlen(s));
}

void jbuf_putc(jbuf *b, char c)
{
    jbuf_put(b, &c, 1);
}

/* Formats straight into the buffer's spare room; retries once with the exact
 * size vsnprintf reported when the first attempt did not fit. */
void jbuf_printf(jbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    size_t room;
    if (!jbuf_reserve(b, 64)) return;
    room = b->cap - b->len;
    va_start(ap, fmt);
    n = vsnprintf(b->p + b->len, room, fmt, ap);
    va_end(ap);
    if (n < 0) { b->p[b->len] = 0; return; }   /* encoding error: write nothing */
    if ((size_t)n >= room) {
        if (!jbuf_reserve(b, (size_t)n)) return;
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* The escaping bankml's original used, byte for byte: only '"', '\\' and the
 * C0 controls are escaped (newline as \n, the rest as \u00xx in lowercase
 * hex); every other byte, including non-ASCII UTF-8, goes out raw. Runs of
 * plain bytes are copied in one jbuf_put. */
void json_put_str(jbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t i, start = 0;
    jbuf_putc(b, '"');
    for (i = 0; i < n; i++) {
        unsigned char c = u[i];
        char esc[6];
        size_t elen;
        if (c == '"') { esc[0] = '\\'; esc[1] = '"'; elen = 2; }
        else if (c == '\\') { esc[0] = '\\'; esc[1] = '\\'; elen = 2; }
        else if (c == '\n') { esc[0] = '\\'; esc[1] = 'n'; elen = 2; }
        else if (c < 0x20) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        } else continue;
        if (i > start) jbuf_put(b, s + start, i - start);
        jbuf_put(b, esc, elen);
        start = i + 1;
    }
    if (n > start) jbuf_put(b, s + start, n - start);
    jbuf_putc(b, '"');
}

void json_put_cstr(jbuf *b, const char *s)
{
    json_put_str(b, s, strlen(s));
}

static size_t utf8_len(const unsigned char *s, size_t n);

/* How many bytes at s[0..n) (s[0] not starting a well-formed sequence) one
 * U+FFFD stands for under nlohmann's replace handler, which is Unicode's
 * "maximal subpart" practice: an impossible first byte alone; else the lead
 * and the continuation bytes that still fit RFC 3629's table, up to the
 * first byte that does not (that byte starts afresh) or the end of input. */
static size_t utf8_bad_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t k, i;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 1;
    for (i = 1; i < k && i < n; i++) {
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (s[i] < l || s[i] > h) return i;
    }
    return i;
}

size_t json_utf8_valid_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k;
    while (i < n && (k = utf8_len(u + i, n - i)) > 0) i += k;
    return i;
}

void json_text_nl(jbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0, k;
    while (i < n) {
        if (u[i] < 0x80) { i++; continue; }
        if ((k = utf8_len(u + i, n - i)) > 0) { i += k; continue; }
        if (i > start) jbuf_put(b, s + start, i - start);
        jbuf_put(b, "\xEF\xBF\xBD", 3);
        i += utf8_bad_len(u + i, n - i);
        start = i;
    }
    if (n > start) jbuf_put(b, s + start, n - start);
}

void json_text_go(jbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0, k;
    while (i < n) {
        if (u[i] < 0x80) { i++; continue; }
        if ((k = utf8_len(u + i, n - i)) > 0) { i += k; continue; }
        if (i > start) jbuf_put(b, s + start, i - start);
        jbuf_put(b, "\xEF\xBF\xBD", 3);
        start = ++i;
    }
    if (n > start) jbuf_put(b, s + start, n - start);
}

void json_text_peg(jbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0;
    while (i < n) {
        size_t k, j;
        if (u[i] < 0x80) { i++; continue; }
        if ((u[i] & 0xC0) == 0x80) k = 0;
        else if ((u[i] & 0xE0) == 0xC0) k = 2;
        else if ((u[i] & 0xF0) == 0xE0) k = 3;
        else if ((u[i] & 0xF8) == 0xF0) k = 4;
        else k = 0;
        for (j = 1; j < k && i + j < n && (u[i + j] & 0xC0) == 0x80; j++) {}
        if (k && j == k) { i += k; continue; }
        if (i > start) jbuf_put(b, s + start, i - start);
        start = i;
        if (k && i + j >= n) return;       /* cut by the end: dropped */
        jbuf_put(b, "\xEF\xBF\xBD", 3);
        i += k ? j : 1;
        start = i;
    }
    if (n > start) jbuf_put(b, s + start, n - start);
}

/* The escape nlohmann's dump() and Go's encoding/json share for an ASCII
 * byte, into esc (at most 6 bytes); 0 when the byte goes out as itself.
 * go adds Go's HTML escapes (<, >, & as \u003c, \u003e, \u0026). */
static size_t ascii_escape(unsigned char c, int go, char *esc)
{
    static const char hex[] = "0123456789abcdef";
    char e = 0;
    switch (c) {
    case '"': e = '"'; break;
    case '\\': e = '\\'; break;
    case '\b': e = 'b'; break;
    case '\f': e = 'f'; break;
    case '\n': e = 'n'; break;
    case '\r': e = 'r'; break;
    case '\t': e = 't'; break;
    default:
        if (c >= 0x20 && !(go && (c == '<' || c == '>' || c == '&'))) return 0;
        memcpy(esc, "\\u00", 4);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        return 6;
    }
    esc[0] = '\\';
    esc[1] = e;
    return 2;
}

void json_put_str_nl(jbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0, k;
    char esc[6];
    jbuf_putc(b, '"');
    while (i < n) {
        if (u[i] < 0x80) {
            size_t el = ascii_escape(u[i], 0, esc);
            if (!el) { i++; continue; }
            if (i > start) jbuf_put(b, s + start, i - start);
            jbuf_put(b, esc, el);
            start = ++i;
            continue;
        }
        if ((k = utf8_len(u + i, n - i)) > 0) { i += k; continue; }
        if (i > start) jbuf_put(b, s + start, i - start);
        jbuf_put(b, "\xEF\xBF\xBD", 3);
        i += utf8_bad_len(u + i, n - i);
        start = i;
    }
    if (n > start) jbuf_put(b, s + start, n - start);
    jbuf_putc(b, '"');
}

void json_put_cstr_nl(jbuf *b, const char *s)
{
    json_put_str_nl(b, s, strlen(s));
}

void json_put_str_go(jbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, start = 0, k;
    char esc[6];
    jbuf_putc(b, '"');
    while (i < n) {
        const char *rep = NULL;
        size_t el = 0, step = 1;
        if (u[i] < 0x80) {
            if (!(el = ascii_escape(u[i], 1, esc))) { i++; continue; }
            rep = esc;
        } else if ((k = utf8_len(u + i, n - i)) == 0) {
            rep = "\\ufffd";
            el = 6;
        } else if (k == 3 && u[i] == 0xE2 && u[i + 1] == 0x80 && (u[i + 2] == 0xA8 || u[i + 2] == 0xA9)) {
            rep = u[i + 2] == 0xA8 ? "\\u2028" : "\\u2029";
            el = 6;
            step = 3;
        } else { i += k; continue; }
        if (i > start) jbuf_put(b, s + start, i - start);
        jbuf_put(b, rep, el);
        i += step;
        start = i;
    }
    if (n > start) jbuf_put(b, s + start, n - start);
    jbuf_putc(b, '"');
}

void json_put_cstr_go(jbuf *b, const char *s)
{
    json_put_str_go(b, s, strlen(s));
}

/* Writes the tree back compactly. Recursion is bounded by the parser's depth
 * limit: every tree comes from json_parse(), so it is at most
 * JSON_MAX_DEPTH deep. Numbers go out as their literal text, so a round trip
 * keeps 2.0 as 2.0. A NULL value is written as null. */
void json_put_value(jbuf *b, const json_value *v)
{
    size_t i;
    if (!v) { jbuf_put(b, "null", 4); return; }
    switch (v->type) {
    case JSON_NULL:   jbuf_put(b, "null", 4); break;
    case JSON_FALSE:  jbuf_put(b, "false", 5); break;
    case JSON_TRUE:   jbuf_put(b, "true", 4); break;
    case JSON_NUMBER: jbuf_put(b, v->str, v->len); break;
    case JSON_STRING: json_put_str(b, v->str, v->len); break;
    case JSON_ARRAY:
        jbuf_putc(b, '[');
        for (i = 0; i < v->n; i++) {
            if (i) jbuf_put(b, ", ", 2);
            json_put_value(b, v->items[i]);
        }
        jbuf_putc(b, ']');
        break;
    case JSON_OBJECT:
        jbuf_putc(b, '{');
        for (i = 0; i < v->n; i++) {
            if (i) jbuf_put(b, ", ", 2);
            json_put_str(b, v->keys[i], v->key_lens[i]);
            jbuf_put(b, ": ", 2);
            json_put_value(b, v->items[i]);
        }
        jbuf_putc(b, '}');
        break;
    }
}

// --------------------------------------------------------------------------
// doubles, as nlohmann::json::dump() prints them
//
// llama-server writes every float it reports (probabilities, logprobs,
// timings) through nlohmann::json 3.12.0, whose to_chars() is Grisu2 followed
// by a %g-like layout. Grisu2 is not always the shortest round-trip form
// (it may keep one digit too many, or pick a last digit one off from the
// closest), so printf("%.17g") or a shortest-form printer would not give the
// same bytes. What follows computes the same digits by the same algorithm
// (Loitsch 2010, "Printing floating-point numbers quickly and accurately with
// integers"), written for this file.

/* f * 2^e with a 64-bit significand ("do-it-yourself floating point"). */
typedef struct { uint64_t f; int e; } dfp;

/* 10^k ~= f * 2^e for k = -300, -292, ..., 324, with f the top 64 bits of
 * 10^k rounded to nearest (so its top bit is set). Produced from exact
 * big-integer arithmetic (Python fractions); the rows equal nlohmann's
 * kCachedPowers, which testing/oracle_json_double.py exercises end to end.
 * One power per 8 decades is enough because the product only needs to land
 * in a 28-wide window of binary exponents. */
static const struct { uint64_t f; int16_t e, k; } pow10_cache[79] = {
{0xAB70FE17C79AC6CAULL, -1060, -300},
    {0xFF77B1FCBEBCDC4FULL, -1034, -292},
    {0xBE5691EF416BD60CULL, -1007, -284},
    {0x8DD01FAD907FFC3CULL,  -980, -276},
    {0xD3515C2831559A83ULL,  -954, -268},
    {0x9D71AC8FADA6C9B5ULL,  -927, -260},
    {0xEA9C227723EE8BCBULL,  -901, -252},
    {0xAECC49914078536DULL,  -874, -244},
    {0x823C12795DB6CE57ULL,  -847, -236},
    {0xC21094364DFB5637ULL,  -821, -228},
    {0x9096EA6F3848984FULL,  -794, -220},
    {0xD77485CB25823AC7ULL,  -768, -212},
    {0xA086CFCD97BF97F4ULL,  -741, -204},
    {0xEF340A98172AACE5ULL,  -715, -196},
    {0xB23867FB2A35B28EULL,  -688, -188},
    {0x84C8D4DFD2C63F3BULL,  -661, -180},
    {0xC5DD44271AD3CDBAULL,  -635, -172},
    {0x936B9FCEBB25C996ULL,  -608, -164},
    {0xDBAC6C247D62A584ULL,  -582, -156},
    {0xA3AB66580D5FDAF6ULL,  -555, -148},
    {0xF3E2F893DEC3F126ULL,  -529, -140},
    {0xB5B5ADA8AAFF80B8ULL,  -502, -132},
    {0x87625F056C7C4A8BULL,  -475, -124},
    {0xC9BCFF6034C13053ULL,  -449, -116},
    {0x964E858C91BA2655ULL,  -422, -108},
    {0xDFF9772470297EBDULL,  -396, -100},
    {0xA6DFBD9FB8E5B88FULL,  -369,  -92},
    {0xF8A95FCF88747D94ULL,  -343,  -84},
    {0xB94470938FA89BCFULL,  -316,  -76},
    {0x8A08F0F8BF0F156BULL,  -289,  -68},
    {0xCDB02555653131B6ULL,  -263,  -60},
    {0x993FE2C6D07B7FACULL,  -236,  -52},
    {0xE45C10C42A2B3B06ULL,  -210,  -44},
    {0xAA242499697392D3ULL,  -183,  -36},
    {0xFD87B5F28300CA0EULL,  -157,  -28},
    {0xBCE5086492111AEBULL,  -130,  -20},
    {0x8CBCCC096F5088CCULL,  -103,  -12},
    {0xD1B71758E219652CULL,   -77,   -4},
    {0x9C40000000000000ULL,   -50,    4},
    {0xE8D4A51000000000ULL,   -24,   12},
    {0xAD78EBC5AC620000ULL,     3,   20},
    {0x813F3978F8940984ULL,    30,   28},
    {0xC097CE7BC90715B3ULL,    56,   36},
    {0x8F7E32CE7BEA5C70ULL,    83,   44},
    {0xD5D238A4ABE98068ULL,   109,   52},
    {0x9F4F2726179A2245ULL,   136,   60},
    {0xED63A231D4C4FB27ULL,   162,   68},
    {0xB0DE65388CC8ADA8ULL,   189,   76},
    {0x83C7088E1AAB65DBULL,   216,   84},
    {0xC45D1DF942711D9AULL,   242,   92},
    {0x924D692CA61BE758ULL,   269,  100},
    {0xDA01EE641A708DEAULL,   295,  108},
    {0xA26DA3999AEF774AULL,   322,  116},
    {0xF209787BB47D6B85ULL,   348,  124},
    {0xB454E4A179DD1877ULL,   375,  132},
    {0x865B86925B9BC5C2ULL,   402,  140},
    {0xC83553C5C8965D3DULL,   428,  148},
    {0x952AB45CFA97A0B3ULL,   455,  156},
    {0xDE469FBD99A05FE3ULL,   481,  164},
    {0xA59BC234DB398C25ULL,   508,  172},
    {0xF6C69A72A3989F5CULL,   534,  180},
    {0xB7DCBF5354E9BECEULL,   561,  188},
    {0x88FCF317F22241E2ULL,   588,  196},
    {0xCC20CE9BD35C78A5ULL,   614,  204},
    {0x98165AF37B2153DFULL,   641,  212},
    {0xE2A0B5DC971F303AULL,   667,  220},
    {0xA8D9D1535CE3B396ULL,   694,  228},
    {0xFB9B7CD9A4A7443CULL,   720,  236},
    {0xBB764C4CA7A44410ULL,   747,  244},
    {0x8BAB8EEFB6409C1AULL,   774,  252},
    {0xD01FEF10A657842CULL,   800,  260},
    {0x9B10A4E5E9913129ULL,   827,  268},
    {0xE7109BFBA19C0C9DULL,   853,  276},
    {0xAC2820D9623BF429ULL,   880,  284},
    {0x80444B5E7AA7CF85ULL,   907,  292},
    {0xBF21E44003ACDD2DULL,   933,  300},
    {0x8E679C2F5E44FF8FULL,   960,  308},
    {0xD433179D9C8CB841ULL,   986,  316},
    {0x9E19DB92B4E31BA9ULL,  1013,  324},
};

/* The upper 64 bits of the 128-bit product x.f * y.f, rounded half up: the
 * same rounding Grisu2's error bound (and nlohmann's output) relies on. Kept
 * to 32-bit halves so it builds without __int128. */
static dfp dfp_mul(dfp x, dfp y)
{
    uint64_t a = x.f >> 32, b = x.f & 0xffffffffu;
    uint64_t c = y.f >> 32, d = y.f & 0xffffffffu;
    uint64_t ac = a * c, ad = a * d, bc = b * c, bd = b * d;
    /* bits 32..95 of the product, plus half of bit 64 for the rounding */
    uint64_t mid = (bd >> 32) + (ad & 0xffffffffu) + (bc & 0xffffffffu) + ((uint64_t)1 << 31);
    dfp r;
    r.f = ac + (ad >> 32) + (bc >> 32) + (mid >> 32);
    r.e = x.e + y.e + 64;
    return r;
}

/* Shifts f left until its top bit is set (f != 0). */
static dfp dfp_norm(dfp x)
{
    while (!(x.f >> 63)) { x.f <<= 1; x.e--; }
    return x;
}

/* Emits the decimal digits of a positive finite v into digits[] (at most 17)
 * and sets *dexp so that v ~= digits * 10^dexp. The digits name a number
 * strictly inside v's rounding interval (narrowed by one unit of the scaled
 * boundaries for safety), cut as soon as the interval allows, then nudged
 * towards v by the last-digit loop at the end. */
static int grisu2_digits(double value, char *digits, int *dexp)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint64_t bexp = (bits >> 52) & 0x7ff, frac = bits & ((((uint64_t)1) << 52) - 1);
    dfp v, hi, lo;
    if (bexp == 0) { v.f = frac; v.e = -1074; }
    else { v.f = frac | ((uint64_t)1 << 52); v.e = (int)bexp - 1075; }

    /* The rounding interval's ends, halfway to the neighbours. At a power of
     * two (frac == 0) the lower neighbour is twice as close. */
    hi.f = 2 * v.f + 1; hi.e = v.e - 1;
    if (frac == 0 && bexp > 1) { lo.f = 4 * v.f - 1; lo.e = v.e - 2; }
    else { lo.f = 2 * v.f - 1; lo.e = v.e - 1; }
    hi = dfp_norm(hi);
    lo.f <<= lo.e - hi.e; lo.e = hi.e;
    v = dfp_norm(v);  /* lands on hi.e as well: hi has one bit more than v */

    /* Pick the cached 10^-k that brings hi.e + e_c + 64 into [-60, -32]:
     * k = ceil((-61 - e) * log10 2), with 78913 / 2^18 ~= log10 2. */
    int t = -61 - hi.e;
    int k = t * 78913 / (1 << 18) + (t > 0);
    int idx = (300 + k + 7) / 8;
    dfp c = { pow10_cache[idx].f, pow10_cache[idx].e };
    *dexp = -pow10_cache[idx].k;

    dfp w = dfp_mul(v, c), up = dfp_mul(hi, c), dn = dfp_mul(lo, c);
    up.f -= 1;  /* each product may be off by one unit: stay inside */
    dn.f += 1;

    /* up = up.f * 2^up.e with -60 <= up.e <= -32: split it into an integer
     * part (fits 32 bits) and a binary fraction of -up.e bits. */
    int sh = -up.e;
    uint64_t one = (uint64_t)1 << sh;
    uint64_t window = up.f - dn.f;   /* how far below up we may stop */
    uint64_t gap = up.f - w.f;       /* where v itself sits below up */
    uint32_t ip = (uint32_t)(up.f >> sh);
    uint64_t fp = up.f & (one - 1);
    int len = 0;

    uint32_t p10 = 1;
    int nd = 1;
    while (nd < 10 && ip / p10 >= 10) { p10 *= 10; nd++; }

    uint64_t rest, unit;
    for (;;) {
        if (nd == 0) break;
        digits[len++] = (char)('0' + ip / p10);
        ip %= p10;
        nd--;
        rest = ((uint64_t)ip << sh) + fp;
        if (rest <= window) {
            *dexp += nd;
            unit = (uint64_t)p10 << sh;
            goto nudge;
        }
        p10 /= 10;
    }
    /* The integer part ran out: continue into the fraction, scaling the
     * window and v's position by 10 with each digit. */
    for (;;) {
        fp *= 10;
        digits[len++] = (char)('0' + (fp >> sh));
        fp &= one - 1;
        window *= 10;
        gap *= 10;
        (*dexp)--;
        if (fp <= window) break;
    }
    rest = fp;
    unit = one;
nudge:
    /* The digits so far sit at up - rest; while taking one unit off the last
     * digit stays in the window and moves closer to v (at up - gap), take it. */
    while (rest < gap && window - rest >= unit &&
           (rest + unit < gap || gap - rest > rest + unit - gap)) {
        digits[len - 1]--;
        rest += unit;
    }
    return len;
}

/* Lays out digits * 10^dexp the way nlohmann's format_buffer does with
 * min_exp = -4 and max_exp = 15 (double's digits10): plain notation with a
 * forced ".0" for whole numbers below 1e15, "0.000ddd" down to 1e-4, and
 * otherwise d.ddde+XX with a signed exponent of at least two digits. */
static size_t layout_digits(char *out, const char *d, int len, int dexp)
{
    size_t o = 0;
    int n = len + dexp;  /* position of the decimal point after digit 0 */
    if (len <= n && n <= 15) {
        memcpy(out, d, (size_t)len); o = (size_t)len;
        for (int i = len; i < n; i++) out[o++] = '0';
        out[o++] = '.'; out[o++] = '0';
    } else if (0 < n && n <= 15) {
        memcpy(out, d, (size_t)n); o = (size_t)n;
        out[o++] = '.';
        memcpy(out + o, d + n, (size_t)(len - n)); o += (size_t)(len - n);
    } else if (-4 < n && n <= 0) {
        out[o++] = '0'; out[o++] = '.';
        for (int i = n; i < 0; i++) out[o++] = '0';
        memcpy(out + o, d, (size_t)len); o += (size_t)len;
    } else {
        int x = n - 1;
        out[o++] = d[0];
        if (len > 1) {
            out[o++] = '.';
            memcpy(out + o, d + 1, (size_t)(len - 1)); o += (size_t)(len - 1);
        }
        out[o++] = 'e';
        out[o++] = x < 0 ? '-' : '+';
        if (x < 0) x = -x;
        if (x >= 100) out[o++] = (char)('0' + x / 100);
        out[o++] = (char)('0' + x / 10 % 10);
        out[o++] = (char)('0' + x % 10);
    }
    return o;
}

void json_put_double(jbuf *b, double v)
{
    char out[40], digits[20];
    size_t o = 0;
    if (isnan(v) || isinf(v)) { jbuf_put(b, "null", 4); return; }
    if (signbit(v)) { out[o++] = '-'; v = -v; }
    if (v == 0) {
        memcpy(out + o, "0.0", 3);
        jbuf_put(b, out, o + 3);
        return;
    }
    int dexp, len = grisu2_digits(v, digits, &dexp);
    o += layout_digits(out + o, digits, len, dexp);
    jbuf_put(b, out, o);
}

// --------------------------------------------------------------------------
// tree

/* A string or number node and its bytes are one allocation (the bytes follow
 * the struct), which halves the malloc count for the common leaves; so
 * v->str must never be freed on its own. */
static json_value *node_new(json_type t, const char *s, size_t len)
{
    json_value *v;
    if (len > SIZE_MAX - sizeof *v - 1) return NULL;
    v = calloc(1, sizeof *v + (s ? len + 1 : 0));
    if (!v) return NULL;
    v->type = t;
    if (s) {
        v->str = (char *)(v + 1);
        if (len) memcpy(v->str, s, len);
        v->str[len] = 0;
        v->len = len;
    }
    return v;
}

/* Recursion depth is bounded by JSON_MAX_DEPTH (trees only come from the
 * parser). */
void json_free(json_value *v)
{
    size_t i;
    if (!v) return;
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (i = 0; i < v->n; i++) {
            json_free(v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
        free(v->key_lens);
    }
    free(v);
}

json_value *json_new(json_type t, const char *s, size_t len)
{
    if (t == JSON_NUMBER) {   /* only a literal the parser reads as one number */
        char err[8];
        json_value *v = s ? json_parse(s, len, err, sizeof err) : NULL;
        if (v && v->type == JSON_NUMBER) return v;
        json_free(v);
        return NULL;
    }
    if (t == JSON_STRING) return node_new(t, s ? s : "", s ? len : 0);
    return node_new(t, NULL, 0);
}

int json_add(json_value *c, const char *key, json_value *v)
{
    int obj = c && c->type == JSON_OBJECT;
    if (!v || !c || (!obj && c->type != JSON_ARRAY) || (obj && !key) || c->n >= SIZE_MAX / sizeof(char *) - 1)
        goto fail;
    json_value **it = realloc(c->items, (c->n + 1) * sizeof *it);
    if (!it) goto fail;
    c->items = it;
    if (obj) {
        size_t kl = strlen(key);
        char **ks = realloc(c->keys, (c->n + 1) * sizeof *ks);
        if (ks) c->keys = ks;
        size_t *ls = ks ? realloc(c->key_lens, (c->n + 1) * sizeof *ls) : NULL;
        if (ls) c->key_lens = ls;
        char *k = ls ? malloc(kl + 1) : NULL;
        if (!k) goto fail;
        memcpy(k, key, kl + 1);
        c->keys[c->n] = k;
        c->key_lens[c->n] = kl;
    }
    c->items[c->n++] = v;
    return 0;
fail:
    json_free(v);
    return -1;
}

const json_value *json_get(const json_value *v, const char *key)
{
    size_t i, kl;
    if (!v || v->type != JSON_OBJECT || !key) return NULL;
    kl = strlen(key);
    for (i = 0; i < v->n; i++)
        if (v->key_lens[i] == kl && memcmp(v->keys[i], key, kl) == 0)
            return v->items[i];
    return NULL;
}

int json_is_bool(const json_value *v, int *out)
{
    if (!v || (v->type != JSON_TRUE && v->type != JSON_FALSE)) return 0;
    if (out) *out = v->type == JSON_TRUE;
    return 1;
}

int json_as_str(const json_value *v, const char **out, size_t *len)
{
    if (!v || v->type != JSON_STRING) return 0;
    if (out) *out = v->str;
    if (len) *len = v->len;
    return 1;
}

/* strtod of the literal, as the contract says: out-of-range literals give
 * what strtod gives (1e400 -> inf, 1e-400 -> 0). The literal grammar was
 * checked by the parser, so strtod consumes all of it (in the "C" locale). */
int json_as_double(const json_value *v, double *out)
{
    if (!v || v->type != JSON_NUMBER) return 0;
    if (out) *out = strtod(v->str, NULL);
    return 1;
}

/* Exact integer view, decided from the literal's digits rather than through
 * a double (which would round 9007199254740993). The value is
 * digits x 10^(exponent - fraction digits); trailing zeros of the digit
 * string move into the exponent. It is accepted iff that value is a whole
 * number in int64 range, whatever its spelling: 100, 1e2, 1.0e2, 100.0 and
 * 1000e-1 all give 100; 1.5, 1e-1 and 1e400 are refused. -0 gives 0. */
int json_as_i64(const json_value *v, int64_t *out)
{
    const char *s, *ip, *fp = NULL;
    size_t ilen = 0, flen = 0, i;
    int neg = 0;
    long long e = 0;            /* the literal's exponent, saturated */
    char dig[64];               /* significant digits (at most 19 used) */
    size_t nd = 0, total, first, last;
    uint64_t mag = 0;

    if (!v || v->type != JSON_NUMBER) return 0;
    s = v->str;
    if (*s == '-') { neg = 1; s++; }
    ip = s;
    while (*s >= '0' && *s <= '9') { s++; ilen++; }
    if (*s == '.') {
        fp = ++s;
        while (*s >= '0' && *s <= '9') { s++; flen++; }
    }
    if (*s == 'e' || *s == 'E') {
        int eneg = 0;
        s++;
        if (*s == '+' || *s == '-') eneg = *s++ == '-';
        for (; *s >= '0' && *s <= '9'; s++)
            if (e < 1000000000000LL) e = e * 10 + (*s - '0');
        if (eneg) e = -e;
    }
    /* Digits as one string ip[0..ilen) fp[0..flen); find the first and last
     * non-zero digits. */
    total = ilen + flen;
    first = total;
    last = 0;
    for (i = 0; i < total; i++) {
        char c = i < ilen ? ip[i] : fp[i - ilen];
        if (c != '0') {
            if (first == total) first = i;
            last = i;
        }
    }
    if (first == total) { if (out) *out = 0; return 1; }   /* zero */
    /* value = D x 10^(e - flen + (total - 1 - last)), D = digits[first..last] */
    {
        long long shift = e - (long long)flen + (long long)(total - 1 - last);
        size_t sig = last - first + 1;
        if (shift < 0) return 0;                       /* a fraction is left */
        if (sig + (size_t)(shift > 40 ? 40 : shift) > 19) return 0;   /* > 10^19 */
        for (i = first; i <= last; i++)
            dig[nd++] = i < ilen ? ip[i] : fp[i - ilen];
        for (i = 0; i < (size_t)shift; i++) dig[nd++] = '0';
    }
    for (i = 0; i < nd; i++) {
        uint64_t d = (uint64_t)(dig[i] - '0');
        if (mag > (UINT64_MAX - d) / 10) return 0;
        mag = mag * 10 + d;
    }
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1) return 0;
        if (out) *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX) return 0;
        if (out) *out = (int64_t)mag;
    }
    return 1;
}

// --------------------------------------------------------------------------
// parser
//
// Iterative: the open arrays and objects live on an explicit stack of
// JSON_MAX_DEPTH frames, so a hostile "[[[[..." costs 128 frames and a refusal,
// never a deep C stack. A container is attached to its parent only when it
// closes; on an error every open frame is freed from the stack.

typedef struct {
    json_value *v;      /* the array or object being filled */
    size_t cap;         /* allocated length of v->items (and keys, key_lens) */
    char *key;          /* OBJECT: the key waiting for its value */
    size_t key_len;
    size_t *slots;      /* OBJECT with many keys: hash index (item index + 1) */
    size_t nslots;      /* power of two, or 0 while the object is small */
} frame;

typedef struct {
    const unsigned char *s;
    size_t len, pos;
    char *err;
    size_t errlen;
    char *tmp;          /* scratch for decoding a string */
    size_t tmp_len, tmp_cap;
    uint64_t seed;      /* per-parse hash seed, so colliding keys can't be precomputed */
    int sp;
    frame st[JSON_MAX_DEPTH];
} parser;

/* Objects switch from a linear key scan to a hash index at this size, so
 * duplicate detection stays linear overall on a hostile million-key object. */
#define SMALL_OBJECT 8

static void failf(parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills err with "invalid JSON at byte N: <what>" (N counts from 0). */
static void failf(parser *p, size_t at, const char *fmt, ...)
{
    char what[128];
    va_list ap;
    if (!p->err || !p->errlen) return;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "invalid JSON at byte %zu: %s", at, what);
}

static void fail_oom(parser *p)
{
    if (p->err && p->errlen) snprintf(p->err, p->errlen, "out of memory parsing JSON");
}

/* RFC 8259 whitespace only: space, tab, CR, LF. */
static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* Names the byte found where something else was expected, for the error. */
static void fail_found(parser *p, const char *expected)
{
    unsigned char c;
    if (p->pos >= p->len) {
        failf(p, p->pos, "unexpected end of input, expected %s", expected);
        return;
    }
    c = p->s[p->pos];
    if (c > 0x20 && c < 0x7f)
        failf(p, p->pos, "expected %s, found '%c'", expected, c);
    else
        failf(p, p->pos, "expected %s, found byte 0x%02x", expected, c);
}

static int tmp_reserve(parser *p, size_t more)
{
    size_t cap;
    char *np;
    if (p->tmp_cap - p->tmp_len >= more) return 1;
    if (more > SIZE_MAX / 2 - p->tmp_len) return 0;
    cap = p->tmp_cap ? p->tmp_cap : 256;
    while (cap - p->tmp_len < more) cap *= 2;
    np = realloc(p->tmp, cap);
    if (!np) return 0;
    p->tmp = np;
    p->tmp_cap = cap;
    return 1;
}

/* Appends code point cp (<= 0x10FFFF, not a surrogate) as UTF-8; room for 4
 * bytes was reserved by the caller. */
static void tmp_put_cp(parser *p, uint32_t cp)
{
    char *o = p->tmp + p->tmp_len;
    if (cp < 0x80) {
        o[0] = (char)cp;
        p->tmp_len += 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        p->tmp_len += 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        p->tmp_len += 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        p->tmp_len += 4;
    }
}

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0. The ranges are
 * RFC 3629's table, which excludes overlong forms (C0, C1, E0 80..9F,
 * F0 80..8F), UTF-16 surrogates (ED A0..BF) and code points above U+10FFFF
 * (F4 90.., F5..FF); a sequence cut short by the end of input is 0 too. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t k, i;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (n < k) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return k;
}

/* Four hex digits at s (n bytes available) -> *out; 0 if they are not. */
static int hex4(const unsigned char *s, size_t n, uint32_t *out)
{
    uint32_t v = 0;
    size_t i;
    if (n < 4) return 0;
    for (i = 0; i < 4; i++) {
        unsigned char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* Decodes the string whose opening quote is at p->pos into p->tmp[0..tmp_len)
 * (NUL-terminated) and leaves p->pos after the closing quote. A high
 * surrogate escape followed by a low one is joined; any other surrogate
 * escape becomes U+FFFD. Raw bytes must be well-formed UTF-8 and not C0
 * controls. Returns 0 with err filled on failure. */
static int parse_string(parser *p)
{
    const unsigned char *s = p->s;
    size_t n = p->len;
    p->tmp_len = 0;
    p->pos++;                                   /* opening quote */
    for (;;) {
        unsigned char c;
        if (!tmp_reserve(p, 5)) { fail_oom(p); return 0; }
        if (p->pos >= n) {
            failf(p, p->pos, "unexpected end of input inside a string");
            return 0;
        }
        c = s[p->pos];
        if (c == '"') { p->pos++; break; }
        if (c < 0x20) {
            failf(p, p->pos, "raw control character 0x%02x in a string", c);
            return 0;
        }
        if (c == '\\') {
            uint32_t cp, lo;
            unsigned char e;
            if (p->pos + 1 >= n) {
                failf(p, p->pos, "unexpected end of input inside a string");
                return 0;
            }
            e = s[p->pos + 1];
            switch (e) {
            case '"':  p->tmp[p->tmp_len++] = '"'; break;
            case '\\': p->tmp[p->tmp_len++] = '\\'; break;
            case '/':  p->tmp[p->tmp_len++] = '/'; break;
            case 'b':  p->tmp[p->tmp_len++] = '\b'; break;
            case 'f':  p->tmp[p->tmp_len++] = '\f'; break;
            case 'n':  p->tmp[p->tmp_len++] = '\n'; break;
            case 'r':  p->tmp[p->tmp_len++] = '\r'; break;
            case 't':  p->tmp[p->tmp_len++] = '\t'; break;
            case 'u':
                if (!hex4(s + p->pos + 2, n - p->pos - 2, &cp)) {
                    failf(p, p->pos, "\\u needs four hex digits");
                    return 0;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF && p->pos + 11 < n &&
                    s[p->pos + 6] == '\\' && s[p->pos + 7] == 'u' &&
                    hex4(s + p->pos + 8, n - p->pos - 8, &lo) &&
                    lo >= 0xDC00 && lo <= 0xDFFF) {
                    tmp_put_cp(p, 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00));
                    p->pos += 6;                /* the low half; +6 below */
                } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                    tmp_put_cp(p, 0xFFFD);      /* lone surrogate */
                } else {
                    tmp_put_cp(p, cp);
                }
                p->pos += 4;
                break;
            default:
                if (e >= 0x20 && e < 0x7f)
                    failf(p, p->pos, "invalid escape '\\%c'", e);
                else
                    failf(p, p->pos, "invalid escape (byte 0x%02x after '\\')", e);
                return 0;
            }
            p->pos += 2;
            continue;
        }
        if (c < 0x80) {
            /* plain ASCII: copy the whole run up to the next special byte */
            size_t j = p->pos + 1;
            while (j < n && s[j] >= 0x20 && s[j] < 0x80 && s[j] != '"' && s[j] != '\\') j++;
            if (!tmp_reserve(p, j - p->pos + 5)) { fail_oom(p); return 0; }
            memcpy(p->tmp + p->tmp_len, s + p->pos, j - p->pos);
            p->tmp_len += j - p->pos;
            p->pos = j;
        } else {
            size_t k = utf8_len(s + p->pos, n - p->pos);
            if (!k) {
                failf(p, p->pos, "invalid UTF-8 (byte 0x%02x)", c);
                return 0;
            }
            memcpy(p->tmp + p->tmp_len, s + p->pos, k);
            p->tmp_len += k;
            p->pos += k;
        }
    }
    p->tmp[p->tmp_len] = 0;
    return 1;
}

/* Checks RFC 8259's number grammar at p->pos and returns its length (0 with
 * err filled if it is malformed): -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)? */
static size_t scan_number(parser *p)
{
    const unsigned char *s = p->s;
    size_t i = p->pos, n = p->len;
#define DIGIT(k) ((k) < n && s[k] >= '0' && s[k] <= '9')
    if (i < n && s[i] == '-') i++;
    if (!DIGIT(i)) { p->pos = i; fail_found(p, "a digit"); return 0; }
    if (s[i] == '0') {
        i++;
        if (DIGIT(i)) { failf(p, i - 1, "leading zero in a number"); return 0; }
    } else {
        while (DIGIT(i)) i++;
    }
    if (i < n && s[i] == '.') {
        i++;
        if (!DIGIT(i)) { p->pos = i; fail_found(p, "a digit after '.'"); return 0; }
        while (DIGIT(i)) i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (!DIGIT(i)) { p->pos = i; fail_found(p, "a digit in the exponent"); return 0; }
        while (DIGIT(i)) i++;
    }
#undef DIGIT
    return i - p->pos;
}

/* A value that is not an array or object, starting at p->pos. */
static json_value *parse_scalar(parser *p)
{
    const unsigned char *s = p->s;
    size_t avail = p->len - p->pos, k;
    json_value *v;
    unsigned char c = s[p->pos];
    if (c == '"') {
        if (!parse_string(p)) return NULL;
        v = node_new(JSON_STRING, p->tmp, p->tmp_len);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        if (!(k = scan_number(p))) return NULL;
        v = node_new(JSON_NUMBER, (const char *)s + p->pos, k);
        p->pos += k;
    } else if (avail >= 4 && memcmp(s + p->pos, "null", 4) == 0) {
        v = node_new(JSON_NULL, NULL, 0);
        p->pos += 4;
    } else if (avail >= 4 && memcmp(s + p->pos, "true", 4) == 0) {
        v = node_new(JSON_TRUE, NULL, 0);
        p->pos += 4;
    } else if (avail >= 5 && memcmp(s + p->pos, "false", 5) == 0) {
        v = node_new(JSON_FALSE, NULL, 0);
        p->pos += 5;
    } else {
        fail_found(p, "a value");
        return NULL;
    }
    if (!v) fail_oom(p);
    return v;
}

/* Reads an object key, the ':' after it and the whitespace after that into
 * the top frame's pending key. */
static int parse_key(parser *p)
{
    frame *f = &p->st[p->sp - 1];
    if (p->pos >= p->len || p->s[p->pos] != '"') {
        fail_found(p, "a string key");
        return 0;
    }
    if (!parse_string(p)) return 0;
    f->key = malloc(p->tmp_len + 1);
    if (!f->key) { fail_oom(p); return 0; }
    memcpy(f->key, p->tmp, p->tmp_len + 1);
    f->key_len = p->tmp_len;
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != ':') {
        fail_found(p, "':'");
        return 0;
    }
    p->pos++;
    return 1;
}

static uint64_t key_hash(const parser *p, const char *k, size_t n)
{
    uint64_t h = p->seed ^ 0xcbf29ce484222325ULL;
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;                       /* final mix (murmur3's fmix64) */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Index of the key in the top frame's object, or (size_t)-1. */
static size_t find_key(const parser *p, const frame *f, const char *k, size_t kl)
{
    const json_value *o = f->v;
    size_t i;
    if (!f->nslots) {
        for (i = 0; i < o->n; i++)
            if (o->key_lens[i] == kl && memcmp(o->keys[i], k, kl) == 0) return i;
        return (size_t)-1;
    }
    for (i = key_hash(p, k, kl) & (f->nslots - 1); f->slots[i]; i = (i + 1) & (f->nslots - 1)) {
        size_t j = f->slots[i] - 1;
        if (o->key_lens[j] == kl && memcmp(o->keys[j], k, kl) == 0) return j;
    }
    return (size_t)-1;
}

static void index_key(const parser *p, frame *f, size_t j)
{
    size_t i = key_hash(p, f->v->keys[j], f->v->key_lens[j]) & (f->nslots - 1);
    while (f->slots[i]) i = (i + 1) & (f->nslots - 1);
    f->slots[i] = j + 1;
}

/* Keeps the hash index at most half full (4x the key count on a rebuild). */
static int grow_index(parser *p, frame *f)
{
    size_t ns = 16, j, n = f->v->n;
    size_t *sl;
    if (n < SMALL_OBJECT || (f->nslots && n * 2 <= f->nslots)) return 1;
    while (ns < n * 4) {
        if (ns > SIZE_MAX / 2 / sizeof *sl) return 0;
        ns *= 2;
    }
    sl = calloc(ns, sizeof *sl);
    if (!sl) return 0;
    free(f->slots);
    f->slots = sl;
    f->nslots = ns;
    for (j = 0; j < n; j++) index_key(p, f, j);
    return 1;
}

/* Gives v to the top frame's container. Takes ownership of v (freed on
 * failure). In an object, a repeated key replaces the earlier value in its
 * first position. */
static int attach(parser *p, json_value *v)
{
    frame *f = &p->st[p->sp - 1];
    json_value *c = f->v;
    if (c->type == JSON_OBJECT) {
        size_t j = find_key(p, f, f->key, f->key_len);
        if (j != (size_t)-1) {
            json_free(c->items[j]);
            c->items[j] = v;
            free(f->key);
            f->key = NULL;
            return 1;
        }
    }
    if (c->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4;
        json_value **it;
        if (cap > SIZE_MAX / sizeof(char *)) goto oom;
        it = realloc(c->items, cap * sizeof *it);
        if (!it) goto oom;
        c->items = it;
        if (c->type == JSON_OBJECT) {
            char **ks = realloc(c->keys, cap * sizeof *ks);
            size_t *kl;
            if (!ks) goto oom;
            c->keys = ks;
            kl = realloc(c->key_lens, cap * sizeof *kl);
            if (!kl) goto oom;
            c->key_lens = kl;
        }
        f->cap = cap;
    }
    c->items[c->n] = v;
    if (c->type == JSON_OBJECT) {
        c->keys[c->n] = f->key;
        c->key_lens[c->n] = f->key_len;
        f->key = NULL;
        c->n++;
        if (f->nslots && c->n * 2 <= f->nslots) index_key(p, f, c->n - 1);
        else if (!grow_index(p, f)) { fail_oom(p); return 0; }
    } else {
        c->n++;
    }
    return 1;
oom:
    json_free(v);
    fail_oom(p);
    return 0;
}

/* Closes the top frame: trims the item arrays to size, drops the hash index
 * and returns the finished container. */
static json_value *pop(parser *p)
{
    frame *f = &p->st[--p->sp];
    json_value *c = f->v;
    if (c->n < f->cap && c->n) {
        void *q = realloc(c->items, c->n * sizeof *c->items);
        if (q) c->items = q;
        if (c->type == JSON_OBJECT) {
            if ((q = realloc(c->keys, c->n * sizeof *c->keys))) c->keys = q;
            if ((q = realloc(c->key_lens, c->n * sizeof *c->key_lens))) c->key_lens = q;
        }
    }
    free(f->slots);
    memset(f, 0, sizeof *f);
    return c;
}

json_value *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    parser *p;
    json_value *root = NULL, *v;

    if (err && errlen) err[0] = 0;
    p = calloc(1, sizeof *p);
    if (!p) {
        if (err && errlen) snprintf(err, errlen, "out of memory parsing JSON");
        return NULL;
    }
    p->s = (const unsigned char *)(text ? text : "");
    p->len = text ? len : 0;
    p->err = err;
    p->errlen = errlen;
    p->seed = (uint64_t)(uintptr_t)p ^ ((uint64_t)(uintptr_t)&root << 17);

    skip_ws(p);
    if (p->pos == p->len) {
        failf(p, p->pos, "no value (empty input)");
        goto fail;
    }
    for (;;) {
        /* A value starts here (whitespace already skipped). */
        unsigned char c;
        if (p->pos >= p->len) { fail_found(p, "a value"); goto fail; }
        c = p->s[p->pos];
        if (c == '[' || c == '{') {
            json_value *box;
            if (p->sp == JSON_MAX_DEPTH) {
                if (err && errlen)
                    snprintf(err, errlen, "JSON nested deeper than %d", JSON_MAX_DEPTH);
                goto fail;
            }
            box = node_new(c == '[' ? JSON_ARRAY : JSON_OBJECT, NULL, 0);
            if (!box) { fail_oom(p); goto fail; }
            p->st[p->sp++].v = box;
            p->pos++;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == (c == '[' ? ']' : '}')) {
                p->pos++;
                v = pop(p);                     /* empty: complete at once */
            } else {
                if (c == '{' && !parse_key(p)) goto fail;
                skip_ws(p);
                continue;
            }
        } else {
            if (!(v = parse_scalar(p))) goto fail;
        }
        /* v is complete: give it to its parent, closing every container that
         * ends here, until one wants another value. */
        for (;;) {
            frame *f;
            if (p->sp == 0) { root = v; goto done; }
            if (!attach(p, v)) goto fail;
            skip_ws(p);
            f = &p->st[p->sp - 1];
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                skip_ws(p);
                if (f->v->type == JSON_OBJECT) {
                    if (!parse_key(p)) goto fail;
                    skip_ws(p);
                }
                break;
            }
            if (p->pos < p->len && p->s[p->pos] == (f->v->type == JSON_ARRAY ? ']' : '}')) {
                p->pos++;
                v = pop(p);
                continue;
            }
            fail_found(p, f->v->type == JSON_ARRAY ? "',' or ']'" : "',' or '}'");
            goto fail;
        }
    }
done:
    skip_ws(p);
    if (p->pos != p->len) {
        fail_found(p, "the end of input after the value");
        json_free(root);
        root = NULL;
    }
    free(p->tmp);
    free(p);
    return root;
fail:
    while (p->sp > 0) {
        frame *f = &p->st[--p->sp];
        json_free(f->v);
        free(f->key);
        free(f->slots);
    }
    free(p->tmp);
    free(p);
    return NULL;
}

/* ---- reading whole files ---- */

int jbuf_read_stream(jbuf *b, FILE *f)
{
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) jbuf_put(b, chunk, got);
    jbuf_put(b, "", 0);   /* a NUL-terminated buffer even when nothing was read */
    if (b->oom) {
        errno = ENOMEM;
        return -1;
    }
    return ferror(f) ? -1 : 0;
}

char *json_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    jbuf b;
    int rc, saved;
    if (!f) return NULL;
    jbuf_init(&b);
    rc = jbuf_read_stream(&b, f);
    saved = errno;
    fclose(f);
    if (rc != 0) {
        jbuf_free(&b);
        errno = saved;
        return NULL;
    }
    if (len) *len = b.len;
    return b.p;
}

/* a newline and lvl * indent spaces (nothing when compact) */
static void nl_newline(jbuf *b, int indent, int lvl)
{
    if (indent < 0) return;
    jbuf_putc(b, '\n');
    for (int i = 0; i < indent * lvl; i++) jbuf_putc(b, ' ');
}

/* v as nlohmann::ordered_json's dump() prints it, which llama-server puts
 * in some of its error messages: no spaces, members in their order,
 * integers as written, other numbers as its doubles, strings with
 * \b \f \n \r \t and \u00xx for the other control bytes. */
static void nl_dump(jbuf *b, const json_value *v, int indent, int lvl)
{
    switch (v->type) {
    case JSON_NULL: jbuf_puts(b, "null"); return;
    case JSON_FALSE: jbuf_puts(b, "false"); return;
    case JSON_TRUE: jbuf_puts(b, "true"); return;
    case JSON_NUMBER: {
        int64_t x;
        /* nlohmann keeps a literal without '.', 'e' or 'E' as an integer
         * when it fits (uint64 for positive values), else a double */
        if (!strpbrk(v->str, ".eE")) {
            if (json_as_i64(v, &x)) {
                jbuf_printf(b, "%lld", (long long)x);
                return;
            }
            if (v->str[0] != '-') {
                errno = 0;
                unsigned long long u = strtoull(v->str, NULL, 10);
                if (errno == 0) {
                    jbuf_printf(b, "%llu", u);
                    return;
                }
            }
        }
        json_put_double(b, strtod(v->str, NULL));
        return;
    }
    case JSON_STRING:
        jbuf_putc(b, '"');
        for (size_t i = 0; i < v->len; i++) {
            unsigned char c = (unsigned char)v->str[i];
            switch (c) {
            case '"': jbuf_puts(b, "\\\""); break;
            case '\\': jbuf_puts(b, "\\\\"); break;
            case '\b': jbuf_puts(b, "\\b"); break;
            case '\f': jbuf_puts(b, "\\f"); break;
            case '\n': jbuf_puts(b, "\\n"); break;
            case '\r': jbuf_puts(b, "\\r"); break;
            case '\t': jbuf_puts(b, "\\t"); break;
            default:
                if (c < 0x20) jbuf_printf(b, "\\u%04x", c);
                else jbuf_putc(b, (char)c);
            }
        }
        jbuf_putc(b, '"');
        return;
    case JSON_ARRAY:
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i) jbuf_putc(b, ',');
            nl_newline(b, indent, lvl + 1);
            nl_dump(b, v->items[i], indent, lvl + 1);
        }
        if (v->n) nl_newline(b, indent, lvl);
        jbuf_putc(b, ']');
        return;
    case JSON_OBJECT:
        jbuf_putc(b, '{');
        for (size_t i = 0; i < v->n; i++) {
            json_value k = {.type = JSON_STRING, .str = v->keys[i], .len = v->key_lens[i]};
            if (i) jbuf_putc(b, ',');
            nl_newline(b, indent, lvl + 1);
            nl_dump(b, &k, indent, lvl + 1);
            jbuf_puts(b, indent >= 0 ? ": " : ":");
            nl_dump(b, v->items[i], indent, lvl + 1);
        }
        if (v->n) nl_newline(b, indent, lvl);
        jbuf_putc(b, '}');
        return;
    }
}

void json_put_nl_dump(jbuf *b, const json_value *v, int indent) { nl_dump(b, v, indent, 0); }
