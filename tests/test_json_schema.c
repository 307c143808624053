/*
 * test_json_schema.c -- unit tests of src/sampling/json_schema.c. Every expected text is what llama.cpp
 * b11669's json_schema_to_grammar() returned for the same schema (testing/kit_schema.cpp, run in process;
 * testing/oracle_schema.py compares thousands more), or bankml's own refusal.
 */
#include <pthread.h>
#include <stdlib.h>

#include "sampling/json_schema.h"
#include "test.h"

#define SPACE "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n"
#define CHAR "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\n"

/* the converter on a JSON text: its return code, and its text in out (free() it) */
static int conv(const char *schema, unsigned flags, char **out)
{
    char err[200];
    size_t len;
    json_value *v = json_parse(schema, strlen(schema), err, sizeof err);
    *out = NULL;
    if (!v) { fprintf(stderr, "bad test JSON: %s\n", err); return -1; }
    int rc = json_schema_to_gbnf(v, flags, out, &len);
    if (*out && strlen(*out) != len) rc = -2;
    json_free(v);
    return rc;
}

static void expect(const char *schema, unsigned flags, int want_rc, const char *want)
{
    char *out;
    int rc = conv(schema, flags, &out);
    CHECK_INT(rc, want_rc);
    CHECK_STR(out, want);
    free(out);
}

TEST(json_schema_object_required_then_optional) {
    expect("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
           "\"b\":{\"type\":\"integer\",\"minimum\":3,\"maximum\":120}},\"required\":[\"a\"]}", 0, JSON_SCHEMA_OK,
           "a-kv ::= \"\\\"a\\\"\" space \":\" space string\n"
           "b ::= ([3-9] | ([1-8] [0-9] | [9] [0-9]) | \"1\" ([0-1] [0-9] | [2] \"0\"))\n"
           "b-kv ::= \"\\\"b\\\"\" space \":\" space b\n"
           CHAR
           "root ::= \"{\" space a-kv ( \",\" space ( b-kv ) )? space \"}\"\n"
           SPACE
           "string ::= \"\\\"\" char* \"\\\"\"\n");
}

TEST(json_schema_consts_in_nlohmann_dump_form) {
    expect("{\"const\":-0}", 0, JSON_SCHEMA_OK, "root ::= \"0\"\n" SPACE);
    expect("{\"const\":1.0}", 0, JSON_SCHEMA_OK, "root ::= \"1.0\"\n" SPACE);
    expect("{\"const\":1e2}", 0, JSON_SCHEMA_OK, "root ::= \"100.0\"\n" SPACE);
    expect("{\"enum\":[{\"b\":1,\"a\":[true,null]},\"q\\\"\"]}", 0, JSON_SCHEMA_OK,
           "root ::= (\"{\\\"b\\\":1,\\\"a\\\":[true,null]}\" | \"\\\"q\\\\\\\"\\\"\")\n" SPACE);
}

TEST(json_schema_reserved_and_colliding_names) {
    /* "space" is not reserved: the property's rule becomes space0; "string" is, so it gets string- */
    expect("{\"properties\":{\"space\":{\"const\":1},\"string\":{\"const\":2}}}", 0, JSON_SCHEMA_OK,
           "root ::= \"{\" space  (space-kv space-rest | string-kv )? space \"}\"\n"
           SPACE
           "space-kv ::= \"\\\"space\\\"\" space \":\" space space0\n"
           "space-rest ::= ( \",\" space string-kv )?\n"
           "space0 ::= \"1\"\n"
           "string- ::= \"2\"\n"
           "string-kv ::= \"\\\"string\\\"\" space \":\" space string-\n");
}

TEST(json_schema_additional_properties_exclude_named_keys) {
    expect("{\"properties\":{\"ab\":{\"type\":\"null\"}},\"additionalProperties\":{\"type\":\"boolean\"}}", 0,
           JSON_SCHEMA_OK,
           "ab-kv ::= \"\\\"ab\\\"\" space \":\" space null\n"
           "ab-rest ::= ( \",\" space additional-kv )*\n"
           "additional-k ::= [\"] ( [a] ([b] char+ | [^\"b] char*) | [^\"a] char* )? [\"]\n"
           "additional-kv ::= additional-k \":\" space boolean\n"
           "boolean ::= (\"true\" | \"false\")\n"
           CHAR
           "null ::= \"null\"\n"
           "root ::= \"{\" space  (ab-kv ab-rest | additional-kv ( \",\" space additional-kv )* )? space \"}\"\n"
           SPACE);
}

TEST(json_schema_patterns) {
    /* a repeated class becomes a sub-rule named after the pattern's rule */
    expect("{\"type\":\"string\",\"pattern\":\"^a(bc)*[0-9]{2}$\"}", 0, JSON_SCHEMA_OK,
           "root ::= \"\\\"\" (\"a\" (\"bc\")* root-1{2,2}) \"\\\"\"\n"
           "root-1 ::= [0-9]\n" SPACE);
    /* unsupported: a plain string (b11669 warns on stderr) */
    expect("{\"type\":\"string\",\"pattern\":\"^\\\\d+$\"}", 0, JSON_SCHEMA_OK,
           CHAR "root ::= string\n" SPACE "string ::= \"\\\"\" char* \"\\\"\"\n");
    /* invalid: collected, all reported */
    expect("{\"properties\":{\"a\":{\"pattern\":\"^(a$\"},\"b\":{\"pattern\":\"^[b$\"}}}", 0, JSON_SCHEMA_REFUSED,
           "JSON schema conversion failed:\nInvalid pattern ^(a$: unbalanced parentheses\n"
           "Invalid pattern ^[b$: unterminated character class");
}

TEST(json_schema_refusals_with_b11669s_words) {
    expect("{\"type\":\"strin\"}", 0, JSON_SCHEMA_REFUSED,
           "JSON schema conversion failed:\nJSON schema error at #: unrecognized type strin");
    expect("{\"anyOf\":[{\"type\":\"string\"},{\"$ref\":\"#/anyOf/7\"}]}", 0, JSON_SCHEMA_REFUSED,
           "JSON schema conversion failed:\nJSON schema error at #/anyOf/1: cannot resolve $ref #/anyOf/7, "
           "7 is out of range");
    expect("{\"$ref\":\"https://x/s.json\"}", 0, JSON_SCHEMA_REFUSED,
           "JSON schema conversion failed:\nJSON schema error at #: unsupported $ref https://x/s.json, "
           "only references into the same document are supported");
    expect("{\"type\":\"array\",\"minItems\":2.0}", 0, JSON_SCHEMA_REFUSED,
           "JSON schema conversion failed:\nJSON schema error at #: minItems must be a non-negative integer");
    expect("{\"type\":\"integer\",\"maximum\":-9223372036854775808}", 0, JSON_SCHEMA_REFUSED,
           "JSON schema conversion failed:\nAt least one of min_value or max_value must be set");
    expect("\"text\"", 0, JSON_SCHEMA_REFUSED, "JSON schema conversion failed:\nJSON schema error at #: schema must be an object");
}

TEST(json_schema_field_flag_empty_object) {
    char *a, *b;
    CHECK_INT(conv("{}", JSON_SCHEMA_FIELD, &a), JSON_SCHEMA_OK);
    CHECK_INT(conv("{\"type\":\"object\"}", 0, &b), JSON_SCHEMA_OK);
    CHECK_STR(a, b);
    free(a);
    free(b);
    CHECK_INT(conv("{}", 0, &a), JSON_SCHEMA_OK);
    CHECK(a && strstr(a, "root ::= value\n") != NULL);
    free(a);
}

TEST(json_schema_refuses_what_b11669_cannot_finish) {
    expect("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"allOf\":[{\"$ref\":\"#/$defs/a\"}]}", 0, JSON_SCHEMA_LIMIT,
           "the JSON schema nests deeper than 200 levels (counting each $ref followed); bankml refuses it");
}

/* a chain of 95 $refs through objects (about 190 levels) in a thread with serve.c's 1 MiB stack */
static void *deep_thread(void *arg)
{
    jbuf b;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"$ref\":\"#/$defs/d0\",\"$defs\":{");
    for (int i = 0; i < 95; i++)
        jbuf_printf(&b, "\"d%d\":{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/$defs/d%d\"}}},", i, i + 1);
    jbuf_puts(&b, "\"d95\":{\"type\":\"string\"}}}");
    char *out;
    int *rc = arg;
    *rc = conv(b.p, 0, &out);
    if (*rc == JSON_SCHEMA_OK && !strstr(out, "\nref-defs-d94-x ::= string\n")) *rc = -3;
    free(out);
    jbuf_free(&b);
    return NULL;
}

TEST(json_schema_deep_chain_fits_a_server_thread) {
    pthread_attr_t at;
    pthread_t t;
    int rc = -1;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 1u << 20);
    CHECK_INT(pthread_create(&t, &at, deep_thread, &rc), 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&at);
    CHECK_INT(rc, JSON_SCHEMA_OK);
}

/* Ollama v0.13.3's llm/server.go: its Completion's format switch, and the cases of its
 * TestLLMServerCompletionFormat (invalid "X" and "\"X\"", valid "", null, "json") */
static int oll(const char *raw, char **out)
{
    return ollama_format_to_gbnf(NULL, raw, strlen(raw), out, NULL);
}

TEST(json_schema_ollama_format) {
    char *out;
    CHECK_INT(oll("X", &out), JSON_SCHEMA_REFUSED);
    CHECK_STR(out, "invalid format: \"X\"; expected \"json\" or a valid JSON Schema object");
    free(out);
    CHECK_INT(oll("\"X\"", &out), JSON_SCHEMA_REFUSED);
    CHECK_STR(out, "invalid format: \"\\\"X\\\"\"; expected \"json\" or a valid JSON Schema object");
    free(out);
    CHECK_INT(oll("[\"a\\tb\",\"\x01\"]", &out), JSON_SCHEMA_REFUSED);
    CHECK_STR(out, "invalid format: \"[\\\"a\\\\tb\\\",\\\"\\x01\\\"]\"; expected \"json\" or a valid JSON Schema object");
    free(out);
    CHECK_INT(oll("", &out), JSON_SCHEMA_OK);
    CHECK(out == NULL);
    CHECK_INT(oll("null", &out), JSON_SCHEMA_OK);
    CHECK(out == NULL);
    CHECK_INT(oll("\"\"", &out), JSON_SCHEMA_OK);
    CHECK(out == NULL);
    CHECK_INT(ollama_format_to_gbnf(NULL, NULL, 0, &out, NULL), JSON_SCHEMA_OK);
    CHECK(out == NULL);
    /* "json": grammarJSON (checked byte for byte against v0.13.3's source when written) */
    CHECK_INT(oll("\"json\"", &out), JSON_SCHEMA_OK);
    const char *head = "\nroot   ::= object\nvalue  ::= object | array | string | number | ";
    CHECK(out && strncmp(out, head, strlen(head)) == 0);
    CHECK(out && strstr(out, "\nws ::= ([ \\t\\n] ws)?\n") && strlen(out) == 599);
    free(out);
    /* a schema: the grammar of Ollama's vendored converter (libstdc++'s unordered_map order) */
    CHECK_INT(oll("{\"type\":\"boolean\"}", &out), JSON_SCHEMA_OK);
    CHECK_STR(out, "root ::= (\"true\" | \"false\") space\n" SPACE);
    free(out);
    CHECK_INT(oll("{\"type\": \"string\", \"pattern\": \"abc\"}", &out), JSON_SCHEMA_REFUSED);
    CHECK_STR(out, "invalid JSON schema in format");
    free(out);
    CHECK_INT(oll("{\"type\": \"string\", \"pattern\": \"^a]$\"}", &out), JSON_SCHEMA_LIMIT);
    head = "format with a JSON schema: Ollama v0.13.3 loops forever on this pattern";
    CHECK(out && strncmp(out, head, strlen(head)) == 0);
    free(out);
    /* without the raw bytes, Go's compact encoding of the parsed value stands in */
    char err[100];
    json_value *v = json_parse("[ \"<x>\" , 1.50 ]", 16, err, sizeof err);
    CHECK_INT(ollama_format_to_gbnf(v, NULL, 0, &out, NULL), JSON_SCHEMA_REFUSED);
    CHECK_STR(out, "invalid format: \"[\\\"\\\\u003cx\\\\u003e\\\",1.50]\"; expected \"json\" or a valid JSON Schema object");
    free(out);
    json_free(v);
}

/* every golden of testing/schemas/ollama-v0.13.3/ (testing/gen_ollama_schema.sh: Ollama v0.13.3's own
 * converter, compiled from its source): the grammar byte for byte, Ollama's error for an exception or a
 * collected error, bankml's refusal where Ollama crashes or hangs. Schemas whose bytes do not start with '{'
 * never reach the converter in Ollama (llm/server.go) and are skipped. */
static size_t ollama_golden(const char *path, size_t *skipped)
{
    size_t len, n = 0;
    char *text = test_read_file(path, &len), err[200];
    CHECK(text != NULL);
    if (!text) return 0;
    json_value *doc = json_parse(text, len, err, sizeof err);
    CHECK(doc != NULL);
    const json_value *cases = doc ? json_get(doc, "cases") : NULL;
    for (size_t k = 0; cases && k < cases->n; k++) {
        const json_value *c = cases->items[k], *s = json_get(c, "schema"), *g = json_get(c, "grammar"),
                         *gh = json_get(c, "grammar_hex"), *e = json_get(c, "error");
        size_t q = 0;
        while (q < s->len && strchr(" \t\r\n", s->str[q])) q++;
        if (q == s->len || s->str[q] != '{') { (*skipped)++; continue; }
        char *want = NULL, *out = NULL;
        size_t wl = 0, ol = 0;
        if (g) { want = g->str; wl = g->len; }
        if (gh) {
            wl = gh->len / 2;
            want = malloc(wl + 1);
            for (size_t i = 0; i < wl; i++) { unsigned v; sscanf(gh->str + 2 * i, "%2x", &v); want[i] = (char)v; }
        }
        int rc = ollama_format_to_gbnf(NULL, s->str, s->len, &out, &ol);
        int ok = want ? rc == JSON_SCHEMA_OK && ol == wl && memcmp(out, want, wl) == 0
                      : e ? rc == JSON_SCHEMA_REFUSED && out && !strcmp(out, "invalid JSON schema in format")
                          : rc == JSON_SCHEMA_LIMIT && out && !strncmp(out, "format with a JSON schema: ", 27);
        if (!ok) fprintf(stderr, "  golden %s: %s (rc %d)\n", path, json_get(c, "name")->str, rc);
        CHECK(ok);
        n++;
        if (gh) free(want);
        free(out);
    }
    if (doc) json_free(doc);
    free(text);
    return n;
}

TEST(json_schema_ollama_goldens) {
    size_t skipped = 0, n = ollama_golden("testing/schemas/ollama-v0.13.3/llama_cpp_tests.json", &skipped);
    n += ollama_golden("testing/schemas/ollama-v0.13.3/own.json", &skipped);
    n += ollama_golden("testing/schemas/ollama-v0.13.3/ollama_extra.json", &skipped);
    CHECK_INT((int)n, 356);
    CHECK_INT((int)skipped, 4);
}
