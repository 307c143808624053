/*
 * test_json.c -- the JSON parser and writer against exact expected trees,
 * bytes and error texts: every value type, RFC 8259's number grammar, the
 * refusals (one per way to be invalid), the depth limit, surrogates, UTF-8
 * validation, duplicate keys and the writer's escaping.
 */
#include "test.h"
#include "base/json.h"

#include <math.h>
#include <stdlib.h>

/* Parses a NUL-terminated literal; the error lands in a static buffer. */
static char g_err[256];
static json_value *P(const char *s)
{
    return json_parse(s, strlen(s), g_err, sizeof g_err);
}

/* 1 if the text is refused and the reason begins with want_prefix. */
static int refused(const char *s, size_t n, const char *want_prefix)
{
    json_value *v = json_parse(s, n, g_err, sizeof g_err);
    if (v) { json_free(v); return 0; }
    return strncmp(g_err, want_prefix, strlen(want_prefix)) == 0;
}
#define REFUSED(lit) refused(lit, sizeof(lit) - 1, "invalid JSON at byte ")

/* Writes v back to a malloc'd string. */
static char *W(const json_value *v)
{
    jbuf b;
    char *s;
    jbuf_init(&b);
    json_put_value(&b, v);
    s = strdup(b.p ? b.p : "");
    jbuf_free(&b);
    return s;
}

TEST(json_scalars)
{
    json_value *v;
    int bl = 7;
    v = P("null");  CHECK(v && v->type == JSON_NULL);  json_free(v);
    v = P("true");  CHECK(v && v->type == JSON_TRUE);
    CHECK(json_is_bool(v, &bl)); CHECK_INT(bl, 1); json_free(v);
    v = P("false"); CHECK(v && v->type == JSON_FALSE);
    CHECK(json_is_bool(v, &bl)); CHECK_INT(bl, 0); json_free(v);
    v = P(" \t\r\n\"hi\" \n");
    CHECK(v && v->type == JSON_STRING);
    if (v) { CHECK_STR(v->str, "hi"); CHECK_INT(v->len, 2); }
    json_free(v);
    v = P("\"\"");
    CHECK(v && v->type == JSON_STRING && v->len == 0 && v->str && v->str[0] == 0);
    json_free(v);
    v = P("-12.5e+3");
    CHECK(v && v->type == JSON_NUMBER);
    if (v) { CHECK_STR(v->str, "-12.5e+3"); CHECK_INT(v->len, 8); }
    json_free(v);
}

TEST(json_containers)
{
    json_value *v = P("{\"a\": [1, \"x\", null, true, {}], \"b\": {\"c\": []}}");
    const json_value *a, *b, *c;
    const char *s = NULL;
    size_t n = 0;
    CHECK(v && v->type == JSON_OBJECT);
    if (!v) return;
    CHECK_INT(v->n, 2);
    CHECK_STR(v->keys[0], "a"); CHECK_INT(v->key_lens[0], 1);
    CHECK_STR(v->keys[1], "b");
    a = json_get(v, "a");
    CHECK(a && a->type == JSON_ARRAY && a->n == 5);
    if (a && a->n == 5) {
        CHECK_STR(a->items[0]->str, "1");
        CHECK(json_as_str(a->items[1], &s, &n)); CHECK_STR(s, "x"); CHECK_INT(n, 1);
        CHECK_INT(a->items[2]->type, JSON_NULL);
        CHECK_INT(a->items[3]->type, JSON_TRUE);
        CHECK(a->items[4]->type == JSON_OBJECT && a->items[4]->n == 0);
    }
    b = json_get(v, "b");
    c = json_get(b, "c");
    CHECK(c && c->type == JSON_ARRAY && c->n == 0);
    CHECK(json_get(v, "zz") == NULL);
    CHECK(json_get(a, "a") == NULL);          /* not an object */
    CHECK(json_get(NULL, "a") == NULL);
    json_free(v);
    v = P("[]");  CHECK(v && v->type == JSON_ARRAY && v->n == 0);  json_free(v);
    v = P("{ }"); CHECK(v && v->type == JSON_OBJECT && v->n == 0); json_free(v);
    v = P("[[[]], [[]]]");
    CHECK(v && v->n == 2 && v->items[1]->n == 1 && v->items[1]->items[0]->n == 0);
    json_free(v);
}

TEST(json_typed_views_refuse_other_types)
{
    json_value *v = P("[\"s\", 1, true]");
    const char *s = "keep";
    size_t n = 99;
    int b = 5;
    double d = 2.5;
    int64_t i = 42;
    CHECK(v != NULL);
    if (!v) return;
    CHECK(!json_as_str(v->items[1], &s, &n)); CHECK_STR(s, "keep"); CHECK_INT(n, 99);
    CHECK(!json_is_bool(v->items[0], &b)); CHECK_INT(b, 5);
    CHECK(!json_as_double(v->items[0], &d)); CHECK(d == 2.5);
    CHECK(!json_as_i64(v->items[2], &i)); CHECK_INT(i, 42);
    CHECK(!json_as_i64(NULL, &i));
    json_free(v);
}

TEST(json_numbers_keep_their_literal)
{
    static const char *ok[] = {
        "0", "-0", "2", "2.0", "1e-7", "1E+400", "-1.5e-10", "0.000", "123456789012345678901234567890",
        "1e999999999999999999999", "0e0", "-0.0E-0",
    };
    size_t i;
    json_value *v;
    char *out;
    double d = 0;
    for (i = 0; i < sizeof ok / sizeof *ok; i++) {
        v = P(ok[i]);
        CHECK(v && v->type == JSON_NUMBER);
        if (v) { CHECK_STR(v->str, ok[i]); CHECK_INT(v->len, strlen(ok[i])); }
        json_free(v);
    }
    v = P("[2, 2.0, -0, 1e-7]");
    out = W(v);
    CHECK_STR(out, "[2, 2.0, -0, 1e-7]");
    free(out);
    CHECK(v && json_as_double(v->items[3], &d) && d == 1e-7);
    CHECK(v && json_as_double(v->items[2], &d) && d == 0 && signbit(d));
    json_free(v);
    v = P("1e400");
    CHECK(v && json_as_double(v, &d) && isinf(d));
    json_free(v);
}

TEST(json_i64_is_exact)
{
    static const struct { const char *lit; int ok; int64_t want; } c[] = {
        {"0", 1, 0}, {"-0", 1, 0}, {"42", 1, 42}, {"-42", 1, -42},
        {"9223372036854775807", 1, INT64_MAX},
        {"-9223372036854775808", 1, INT64_MIN},
        {"9223372036854775808", 0, 0}, {"-9223372036854775809", 0, 0},
        {"18446744073709551616", 0, 0},
        {"9007199254740993", 1, 9007199254740993LL},    /* not a double */
        {"1e2", 1, 100}, {"1.0", 1, 1}, {"100.00", 1, 100}, {"1000e-1", 1, 100},
        {"1.5e1", 1, 15}, {"12345678901234567890e-1", 1, 1234567890123456789LL},
        {"0.0e99999", 1, 0}, {"9.223372036854775807e18", 1, INT64_MAX},
        {"1.5", 0, 0}, {"1e-1", 0, 0}, {"0.5", 0, 0}, {"1e400", 0, 0}, {"1e19", 0, 0},
        {"1e18", 1, 1000000000000000000LL}, {"10e-1", 1, 1}, {"1e-99999999999999999999", 0, 0},
    };
    size_t i;
    for (i = 0; i < sizeof c / sizeof *c; i++) {
        json_value *v = P(c[i].lit);
        int64_t got = -7;
        int r;
        CHECK(v != NULL);
        r = json_as_i64(v, &got);
        if (r != c[i].ok) test_fail(__FILE__, __LINE__, "json_as_i64(%s) = %d", c[i].lit, r);
        if (c[i].ok && got != c[i].want)
            test_fail(__FILE__, __LINE__, "json_as_i64(%s) gave %lld", c[i].lit, (long long)got);
        if (!c[i].ok && got != -7)
            test_fail(__FILE__, __LINE__, "json_as_i64(%s) wrote *out", c[i].lit);
        json_free(v);
    }
}

TEST(json_refuses_invalid_documents)
{
    /* Each one refused with "invalid JSON at byte N: ...". */
    CHECK(REFUSED(""));
    CHECK(REFUSED("   \n"));
    CHECK(REFUSED("[1,]"));
    CHECK(REFUSED("{\"a\":1,}"));
    CHECK(REFUSED("[,1]"));
    CHECK(REFUSED("{,}"));
    CHECK(REFUSED("['a']"));
    CHECK(REFUSED("{'a': 1}"));
    CHECK(REFUSED("{a: 1}"));
    CHECK(REFUSED("NaN"));
    CHECK(REFUSED("Infinity"));
    CHECK(REFUSED("-Infinity"));
    CHECK(REFUSED("01"));
    CHECK(REFUSED("-01"));
    CHECK(REFUSED("00"));
    CHECK(REFUSED("+1"));
    CHECK(REFUSED(".5"));
    CHECK(REFUSED("1."));
    CHECK(REFUSED("1.e5"));
    CHECK(REFUSED("1e"));
    CHECK(REFUSED("1e+"));
    CHECK(REFUSED("-"));
    CHECK(REFUSED("0x10"));
    CHECK(REFUSED("\"\\x41\""));
    CHECK(REFUSED("\"\\u12\""));
    CHECK(REFUSED("\"\\u12G4\""));
    CHECK(REFUSED("\"\\U0041\""));
    CHECK(REFUSED("\"\\'\""));
    CHECK(REFUSED("\"a\tb\""));          /* raw tab */
    CHECK(REFUSED("\"a\nb\""));
    CHECK(refused("\"a\0b\"", 5, "invalid JSON at byte 2: "));   /* raw NUL */
    CHECK(REFUSED("\"\x1f\""));
    CHECK(REFUSED("\"abc"));
    CHECK(REFUSED("\"abc\\"));
    CHECK(REFUSED("[1, 2"));
    CHECK(REFUSED("{\"a\": 1"));
    CHECK(REFUSED("{\"a\" 1}"));
    CHECK(REFUSED("{\"a\":}"));
    CHECK(REFUSED("{\"a\"}"));
    CHECK(REFUSED("[1 2]"));
    CHECK(REFUSED("[1}"));
    CHECK(REFUSED("{\"a\":1]"));
    CHECK(REFUSED("tru"));
    CHECK(REFUSED("nul"));
    CHECK(REFUSED("True"));
    CHECK(REFUSED("nulls"));
    CHECK(REFUSED("[1] x"));
    CHECK(REFUSED("1 2"));
    CHECK(REFUSED("{} {}"));
    CHECK(REFUSED("\f1"));               /* form feed is not JSON whitespace */
    CHECK(REFUSED("\v1"));
    CHECK(REFUSED("\xc2\xa0" "1"));      /* nor is NBSP */
    CHECK(REFUSED("1\x00"));             /* a NUL after the value */
    CHECK(refused("1\0", 2, "invalid JSON at byte 1: "));
    CHECK(REFUSED("\xef\xbb\xbf" "1"));  /* a BOM is not whitespace either */
    CHECK(REFUSED("/* c */ 1"));
    CHECK(json_parse(NULL, 0, NULL, 0) == NULL);
}

TEST(json_error_texts)
{
    json_value *v;
    char small[16];
    v = P("");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 0: no value (empty input)");
    v = P("[1,]");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 3: expected a value, found ']'");
    v = P("{\"a\" 1}");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 5: expected ':', found '1'");
    v = P("[1 2]");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 3: expected ',' or ']', found '2'");
    v = P("01");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 0: leading zero in a number");
    v = P("[1] x");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 4: expected the end of input after the value, found 'x'");
    v = P("[1, 2");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 5: unexpected end of input, expected ',' or ']'");
    v = P("\"ab\x01\"");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 3: raw control character 0x01 in a string");
    v = P("[\"\\q\"]");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 2: invalid escape '\\q'");
    v = P("\"\xc0\x80\"");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 1: invalid UTF-8 (byte 0xc0)");
    v = P("1.");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 2: unexpected end of input, expected a digit after '.'");
    v = P("{\"a\":1,}");
    CHECK(!v); CHECK_STR(g_err, "invalid JSON at byte 7: expected a string key, found '}'");
    /* A short buffer gets a truncated, terminated reason. */
    v = json_parse("[", 1, small, sizeof small);
    CHECK(!v); CHECK_STR(small, "invalid JSON at");
}

/* n '[' then n ']' (or fewer closing brackets). */
static char *nest(size_t n, size_t closing)
{
    char *s = malloc(n + closing + 1);
    if (!s) return NULL;
    memset(s, '[', n);
    memset(s + n, ']', closing);
    s[n + closing] = 0;
    return s;
}

TEST(json_depth_limit)
{
    char *s = nest(128, 128);
    json_value *v;
    size_t d = 0;
    const json_value *w;
    v = json_parse(s, 256, g_err, sizeof g_err);
    CHECK(v != NULL);
    for (w = v; w && w->type == JSON_ARRAY; w = w->n ? w->items[0] : NULL) d++;
    CHECK_INT(d, 128);
    json_free(v);
    free(s);
    s = nest(129, 129);
    v = json_parse(s, 258, g_err, sizeof g_err);
    CHECK(v == NULL);
    CHECK_STR(g_err, "JSON nested deeper than 128");
    free(s);
    /* objects count the same */
    {
        char buf[129 * 6 + 130];
        size_t i, k = 0;
        for (i = 0; i < 129; i++) { memcpy(buf + k, "{\"a\":", 5); k += 5; }
        buf[k++] = '1';
        for (i = 0; i < 129; i++) buf[k++] = '}';
        v = json_parse(buf, k, g_err, sizeof g_err);
        CHECK(v == NULL);
        CHECK_STR(g_err, "JSON nested deeper than 128");
        v = json_parse(buf + 5, k - 6, g_err, sizeof g_err);   /* 128 deep */
        CHECK(v != NULL);
        json_free(v);
    }
}

TEST(json_two_million_deep_refused)
{
    size_t n = 2000000;
    char *s = nest(n, 0);
    json_value *v;
    CHECK(s != NULL);
    if (!s) return;
    v = json_parse(s, n, g_err, sizeof g_err);
    CHECK(v == NULL);
    CHECK_STR(g_err, "JSON nested deeper than 128");
    /* the same with objects and arrays mixed */
    {
        size_t i;
        for (i = 0; i + 6 <= n; i += 6) memcpy(s + i, "{\"\":[", 5), s[i + 5] = ' ';
        v = json_parse(s, i, g_err, sizeof g_err);
        CHECK(v == NULL);
        CHECK_STR(g_err, "JSON nested deeper than 128");
    }
    free(s);
}

TEST(json_surrogates)
{
    json_value *v = P("\"\\ud83c\\udf55\"");
    CHECK(v && v->len == 4);
    if (v) CHECK_MEM(v->str, "\xF0\x9F\x8D\x95", 5);
    json_free(v);
    v = P("\"\\uD83D\\uDE00\"");                          /* upper-case hex */
    CHECK(v && v->len == 4);
    if (v) CHECK_MEM(v->str, "\xF0\x9F\x98\x80", 5);
    json_free(v);
    v = P("\"\\udbff\\udfff\"");                          /* U+10FFFF */
    CHECK(v && v->len == 4);
    if (v) CHECK_MEM(v->str, "\xF4\x8F\xBF\xBF", 5);
    json_free(v);
    v = P("\"\\ud83c\"");                                 /* lone high */
    CHECK(v && v->len == 3);
    if (v) CHECK_MEM(v->str, "\xEF\xBF\xBD", 4);
    json_free(v);
    v = P("\"\\udf55\"");                                 /* lone low */
    CHECK(v && v->len == 3);
    if (v) CHECK_MEM(v->str, "\xEF\xBF\xBD", 4);
    json_free(v);
    v = P("\"\\udf55\\ud83c\"");                          /* reversed pair */
    CHECK(v && v->len == 6);
    if (v) CHECK_MEM(v->str, "\xEF\xBF\xBD\xEF\xBF\xBD", 7);
    json_free(v);
    v = P("\"\\ud83cx\\ud83c\\u0041\\ud83c\\ud83c\\udf55\"");
    CHECK(v && v->len == 15);
    if (v) CHECK_MEM(v->str, "\xEF\xBF\xBDx\xEF\xBF\xBD" "A\xEF\xBF\xBD\xF0\x9F\x8D\x95", 16);
    json_free(v);
    CHECK(REFUSED("\"\\ud83c\\uZZZZ\""));                /* the bad escape still counts */
    v = P("\"\\u00e9\\u20AC\\u0041\\u007f\"");
    CHECK(v && v->len == 7);
    if (v) CHECK_MEM(v->str, "\xC3\xA9\xE2\x82\xAC" "A\x7F", 8);
    json_free(v);
}

TEST(json_escapes_and_nul)
{
    json_value *v = P("\"a\\u0000b\"");
    CHECK(v && v->len == 3);
    if (v) CHECK_MEM(v->str, "a\0b", 4);
    json_free(v);
    v = P("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"");
    CHECK(v && v->len == 8);
    if (v) CHECK_MEM(v->str, "\"\\/\b\f\n\r\t", 9);
    json_free(v);
    v = P("{\"k\\u0000\": 1}");                           /* NUL in a key */
    CHECK(v && v->n == 1 && v->key_lens[0] == 2);
    if (v && v->n == 1) CHECK_MEM(v->keys[0], "k\0", 3);
    CHECK(json_get(v, "k") == NULL);
    json_free(v);
}

TEST(json_utf8_validation)
{
    static const char *good[] = {
        "\"\xC2\x80\"", "\"\xDF\xBF\"", "\"\xE0\xA0\x80\"", "\"\xED\x9F\xBF\"", "\"\xEE\x80\x80\"",
        "\"\xEF\xBF\xBF\"", "\"\xF0\x90\x80\x80\"", "\"\xF4\x8F\xBF\xBF\"", "\"h\xC3\xA9llo \xE2\x82\xAC\"",
    };
    static const char *bad[] = {
        "\"\xC0\x80\"",          /* overlong NUL */
        "\"\xC1\xBF\"",          /* overlong */
        "\"\xE0\x80\x80\"",      /* overlong 3-byte */
        "\"\xE0\x9F\xBF\"",
        "\"\xF0\x80\x80\x80\"",  /* overlong 4-byte */
        "\"\xF0\x8F\xBF\xBF\"",
        "\"\xED\xA0\x80\"",      /* U+D800 encoded */
        "\"\xED\xBF\xBF\"",      /* U+DFFF encoded */
        "\"\xF4\x90\x80\x80\"",  /* U+110000 */
        "\"\xF5\x80\x80\x80\"",
        "\"\xFF\"", "\"\xFE\"",
        "\"\x80\"",              /* lone continuation */
        "\"\xC3\"",              /* truncated 2-byte */
        "\"\xE2\x82\"",          /* truncated 3-byte */
        "\"\xF0\x9F\x8D\"",      /* truncated 4-byte */
        "\"\xC3\x28\"",          /* bad continuation */
        "\"\xE2\x28\xA1\"",
    };
    size_t i;
    for (i = 0; i < sizeof good / sizeof *good; i++) {
        json_value *v = P(good[i]);
        CHECK(v && v->len == strlen(good[i]) - 2);
        if (v) CHECK_MEM(v->str, good[i] + 1, v->len);
        json_free(v);
    }
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (!refused(bad[i], strlen(bad[i]), "invalid JSON at byte 1: invalid UTF-8"))
            test_fail(__FILE__, __LINE__, "bad[%zu] accepted or wrong reason: %s", i, g_err);
    }
    /* truncated at the very end of input (no closing quote) */
    CHECK(refused("\"\xE2\x82", 3, "invalid JSON at byte 1: invalid UTF-8"));
    /* non-ASCII outside a string */
    CHECK(refused("\xC3\xA9", 2, "invalid JSON at byte 0: expected a value, found byte 0xc3"));
}

TEST(json_duplicate_keys_last_wins)
{
    json_value *v = P("{\"a\": 1, \"b\": 2, \"a\": 3}");
    char *out;
    CHECK(v && v->n == 2);
    if (v && v->n == 2) {
        CHECK_STR(v->keys[0], "a");
        CHECK_STR(v->keys[1], "b");
        CHECK_STR(v->items[0]->str, "3");
        CHECK_STR(json_get(v, "a")->str, "3");
    }
    out = W(v);
    CHECK_STR(out, "{\"a\": 3, \"b\": 2}");
    free(out);
    json_free(v);
    /* a replaced container is freed (ASan checks) and nested dups work */
    v = P("{\"x\": {\"y\": [1, 2]}, \"x\": {\"y\": 0, \"y\": {\"z\": null}}}");
    out = W(v);
    CHECK_STR(out, "{\"x\": {\"y\": {\"z\": null}}}");
    free(out);
    json_free(v);
}

TEST(json_large_object_hash_index)
{
    /* 3000 distinct keys, then every key again with a new value: the hashed
     * duplicate path must keep first positions and take the last values. */
    jbuf b;
    json_value *v;
    size_t i;
    int ok = 1;
    jbuf_init(&b);
    jbuf_putc(&b, '{');
    for (i = 0; i < 3000; i++) jbuf_printf(&b, "%s\"k%zu\": %zu", i ? ", " : "", i, i);
    for (i = 0; i < 3000; i++) jbuf_printf(&b, ", \"k%zu\": %zu", 2999 - i, 100000 + 2999 - i);
    jbuf_putc(&b, '}');
    CHECK(!b.oom);
    v = json_parse(b.p, b.len, g_err, sizeof g_err);
    CHECK(v && v->n == 3000);
    for (i = 0; v && i < v->n && ok; i++) {
        char k[32], val[32];
        snprintf(k, sizeof k, "k%zu", i);
        snprintf(val, sizeof val, "%zu", 100000 + i);
        if (strcmp(v->keys[i], k) || strcmp(v->items[i]->str, val)) ok = 0;
    }
    CHECK(ok);
    CHECK(v && strcmp(json_get(v, "k1234")->str, "101234") == 0);
    json_free(v);
    jbuf_free(&b);
}

TEST(json_writer_escapes_byte_exact)
{
    jbuf b;
    const char in[] = "q\"b\\n\nt\tr\rb\bf\fz\0u\x1f" "d\x7f/\xC3\xA9<>&'";
    const char want[] = "\"q\\\"b\\\\n\\nt\\u0009r\\u000db\\u0008f\\u000cz\\u0000u\\u001f"
                        "d\x7f/\xC3\xA9<>&'\"";
    jbuf_init(&b);
    json_put_str(&b, in, sizeof in - 1);
    CHECK(!b.oom);
    CHECK_INT(b.len, sizeof want - 1);
    CHECK_STR(b.p, want);
    jbuf_reset(&b);
    CHECK_INT(b.len, 0);
    json_put_cstr(&b, "");
    CHECK_STR(b.p, "\"\"");
    jbuf_reset(&b);
    /* every byte below 0x20 */
    {
        char all[32];
        jbuf want2;
        int i;
        for (i = 0; i < 32; i++) all[i] = (char)i;
        jbuf_init(&want2);
        jbuf_putc(&want2, '"');
        for (i = 0; i < 32; i++) {
            if (i == '\n') jbuf_puts(&want2, "\\n");
            else jbuf_printf(&want2, "\\u%04x", i);
        }
        jbuf_putc(&want2, '"');
        json_put_str(&b, all, 32);
        CHECK_INT(b.len, want2.len);
        CHECK_STR(b.p, want2.p);
        jbuf_free(&want2);
    }
    jbuf_free(&b);
}

TEST(json_jbuf)
{
    jbuf b;
    char big[5000];
    jbuf_init(&b);
    CHECK(b.p == NULL && b.len == 0 && !b.oom);
    jbuf_puts(&b, "ab");
    jbuf_putc(&b, 'c');
    jbuf_put(&b, "de", 2);
    jbuf_printf(&b, "%d-%s", 42, "x");
    CHECK_STR(b.p, "abcde42-x");
    CHECK_INT(b.len, 9);
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = 0;
    jbuf_printf(&b, "[%s]", big);           /* longer than the spare room */
    CHECK_INT(b.len, 9 + 2 + 4999);
    CHECK(b.p[9] == '[' && b.p[10] == 'z' && b.p[b.len - 1] == ']' && b.p[b.len] == 0);
    jbuf_reset(&b);
    CHECK_STR(b.p, "");
    jbuf_free(&b);
    CHECK(b.p == NULL);
}

TEST(json_round_trip)
{
    const char *doc =
        "{\n  \"model\" : \"bonsai\",\n  \"messages\": [ {\"role\":\"user\",\"content\":\"hi \\\"you\\\"\\n\\u00e9\\ud83c\\udf55\\t\"} ],\n"
        "  \"temperature\":0.70, \"max_tokens\" :  64, \"stop\":[], \"opts\":{}, \"x\":[null,true,false,-0,1E5]\n}\n";
    const char *want =
        "{\"model\": \"bonsai\", \"messages\": [{\"role\": \"user\", \"content\": \"hi \\\"you\\\"\\n\xC3\xA9\xF0\x9F\x8D\x95\\u0009\"}], "
        "\"temperature\": 0.70, \"max_tokens\": 64, \"stop\": [], \"opts\": {}, \"x\": [null, true, false, -0, 1E5]}";
    json_value *v = P(doc), *v2;
    char *out, *out2;
    int64_t mt = 0;
    double t = 0;
    CHECK(v != NULL);
    out = W(v);
    CHECK_STR(out, want);
    v2 = json_parse(out, strlen(out), g_err, sizeof g_err);
    CHECK(v2 != NULL);
    out2 = W(v2);
    CHECK_STR(out2, want);
    CHECK(json_as_i64(json_get(v2, "max_tokens"), &mt)); CHECK_INT(mt, 64);
    CHECK(json_as_double(json_get(v2, "temperature"), &t)); CHECK(t == 0.70);
    free(out);
    free(out2);
    json_free(v);
    json_free(v2);
    out = W(NULL);
    CHECK_STR(out, "null");
    free(out);
}

/* json_put_double against nlohmann::json 3.11.2/3.12.0 dump(): every expected
 * text below was printed by testing/kit_nlohmann_double.cpp for the double
 * with the given bit pattern. Several are not the shortest round-trip form
 * (0.1f, -0.4941..., -28.78..., 1e23), which is the point: bankml must print
 * llama-server's bytes, not the shortest ones. */
static const struct { uint64_t bits; const char *want; } dump_cases[] = {
    {0x3ff0000000000000ULL, "1.0"},
    {0x0000000000000000ULL, "0.0"},
    {0x8000000000000000ULL, "-0.0"},
    {0xbfdf9f7e40000000ULL, "-0.49410969018936157"},   /* shortest: -0.4941096901893616 */
    {0xc03cc86d00000000ULL, "-28.782913208007813"},    /* exactly -28.7829132080078125 */
    {0x3fb99999a0000000ULL, "0.10000000149011612"},    /* 0.1f widened */
    {0x3fb999999999999aULL, "0.1"},
    {0x4415af1d78b58c40ULL, "1e+20"},
    {0x3e7ad7f29abcaf48ULL, "1e-07"},
    {0x3e8421f5f40d8376ULL, "1.5e-07"},
    {0x3ee4f8b588e368f1ULL, "1e-05"},
    {0x3f1a36e2eb1c432dULL, "0.0001"},
    {0x3f50624dd2f1a9fcULL, "0.001"},
    {0x42dc12218377de40ULL, "123456789012345.0"},
    {0x430c6bf526340000ULL, "1e+15"},
    {0x430c6bf52633fff8ULL, "999999999999999.0"},
    {0x4341c37937e08000ULL, "1e+16"},
    {0x4340000000000000ULL, "9.007199254740992e+15"},  /* 2^53 */
    {0xc44b1ae4d6e2ef50ULL, "-1e+21"},
    {0x44b52d02c7e14af6ULL, "9.999999999999999e+22"},  /* 1e23 */
    {0x54b249ad2594c37dULL, "1e+100"},
    {0x01a56e1fc2f8f359ULL, "1e-300"},
    {0x0000000000000001ULL, "5e-324"},
    {0x0000000000000003ULL, "1.5e-323"},
    {0x0010000000000000ULL, "2.2250738585072014e-308"},
    {0x7fefffffffffffffULL, "1.7976931348623157e+308"},
    {0xbfe62e4300000000ULL, "-0.6931471824645996"},    /* (float)-ln 2 widened */
    {0x3a25973920000000ULL, "1.362565704110453e-28"},  /* needs the rounded 64x64 product */
    {0xbfd0e081c0000000ULL, "-0.26370280981063843"},   /* needs the lower bound's +1 */
    {0xbfd1567e40000000ULL, "-0.27090412378311157"},   /* needs the upper bound's -1 */
    {0xc045000000000000ULL, "-42.0"},
    {0x40934a456d5cfaadULL, "1234.5678"},
    {0x7ff0000000000000ULL, "null"},                   /* +inf */
    {0xfff0000000000000ULL, "null"},                   /* -inf */
    {0x7ff8000000000000ULL, "null"},                   /* NaN */
    {0xfff0000000000001ULL, "null"},                   /* NaN, sign and payload set */
};

TEST(json_put_double_matches_nlohmann)
{
    jbuf b;
    jbuf_init(&b);
    for (size_t i = 0; i < sizeof dump_cases / sizeof dump_cases[0]; i++) {
        double v;
        memcpy(&v, &dump_cases[i].bits, sizeof v);
        jbuf_reset(&b);
        json_put_double(&b, v);
        CHECK(!b.oom);
        CHECK_STR(b.p, dump_cases[i].want);
        CHECK_INT(b.len, strlen(dump_cases[i].want));
    }
    /* appends: it does not reset or terminate anything else in the buffer */
    jbuf_reset(&b);
    jbuf_puts(&b, "{\"logprob\": ");
    json_put_double(&b, -28.7829132080078125);
    jbuf_put(&b, ", \"p\": ", 7);
    json_put_double(&b, (double)0.5f);
    jbuf_putc(&b, '}');
    CHECK_STR(b.p, "{\"logprob\": -28.782913208007813, \"p\": 0.5}");
    jbuf_free(&b);
}

/* json_new / json_add: a tree made in code reads and prints as the parsed
 * text would, and frees with json_free (make asan checks the frees). */
TEST(json_build_tree)
{
    json_value *o = json_new(JSON_OBJECT, NULL, 0);
    CHECK(o && o->type == JSON_OBJECT && o->n == 0);
    CHECK_INT(json_add(o, "temperature", json_new(JSON_NUMBER, "0.5", 3)), 0);
    CHECK_INT(json_add(o, "seed", json_new(JSON_NUMBER, "-1", 2)), 0);
    json_value *arr = json_new(JSON_ARRAY, NULL, 0);
    CHECK_INT(json_add(arr, NULL, json_new(JSON_STRING, "top_k;x", 5)), 0);
    CHECK_INT(json_add(arr, "ignored", json_new(JSON_STRING, "", 0)), 0);
    CHECK_INT(json_add(o, "samplers", arr), 0);
    /* not numbers: refused as the parser refuses them, and json_add takes NULL as a failure */
    CHECK(json_new(JSON_NUMBER, "1x", 2) == NULL);
    CHECK(json_new(JSON_NUMBER, "\"1\"", 3) == NULL);
    CHECK(json_new(JSON_NUMBER, "", 0) == NULL);
    CHECK_INT(json_add(o, "bad", json_new(JSON_NUMBER, "--1", 3)), -1);
    CHECK_INT(json_add(o, NULL, json_new(JSON_TRUE, NULL, 0)), -1);          /* an object needs a key */
    CHECK_INT(json_add(arr->items[0], NULL, json_new(JSON_NULL, NULL, 0)), -1); /* a string holds nothing */
    CHECK_INT(o->n, 3);
    double t = 0;
    CHECK(json_as_double(json_get(o, "temperature"), &t));
    CHECK(t == 0.5);
    jbuf b;
    jbuf_init(&b);
    json_put_value(&b, o);
    CHECK(!b.oom);
    CHECK_STR(b.p, "{\"temperature\": 0.5, \"seed\": -1, \"samplers\": [\"top_k\", \"\"]}");
    jbuf_free(&b);
    json_free(o);
}
