/*
 * test_peg.c -- the PEG builder, text form, grammar writer and chat mapper
 * (src/text/peg.c, peg_parse.c, chat_peg.c, src/sampling/peg_grammar.c).
 *
 * peg_builder_matches_b11669 builds, with this module's builder, the arena a
 * C++ program built with b11669's common_peg_parser_builder (libllama-common
 * under sid-run, the arena written by testing/kit_chat.cpp's writer); the
 * expected text form, grammars, dump and parses below are what that program
 * printed (lengths and SHA-256 for the long ones).
 */
#include "test.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/sha256.h"
#include "sampling/json_schema.h"
#include "sampling/peg_grammar.h"
#include "text/chat_peg.h"
#include "text/peg.h"

static void hex_sha(const char *s, size_t n, char out[65])
{
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, s, n);
    sha256_final(&c, d);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* the arena of the C++ program, statement for statement in its evaluation order */
static size_t build_b11669_case(peg_arena *a)
{
    size_t v[9];
    v[0] = peg_literal_c(a, "<think>");
    size_t u = peg_until(a, "</think>", 8);
    v[1] = peg_tag(a, "reasoning", u);
    v[2] = peg_literal_c(a, "</think>");
    v[3] = peg_space(a);
    size_t think = peg_optional(a, peg_sequence(a, v, 4));
    peg_str ends[2] = { { "<tool_call>", 11 }, { "<|end|>", 7 } };
    size_t content = peg_tag(a, "content", peg_until_one_of(a, ends, 2));

    v[0] = peg_literal_c(a, "<tool_call>");
    v[1] = peg_space(a);
    size_t open = peg_literal_c(a, "{\"name\": \"");
    v[2] = peg_atomic(a, peg_tag(a, "tool-open", open));
    size_t name = peg_chars(a, "[a-z_]", 1, 16);
    v[3] = peg_atomic(a, peg_tag(a, "tool-name", name));
    v[4] = peg_literal_c(a, "\", \"arguments\": ");
    v[5] = peg_tag(a, "tool-args", peg_json(a));
    v[6] = peg_literal_c(a, "}");
    v[7] = peg_space(a);
    size_t close = peg_literal_c(a, "</tool_call>");
    v[8] = peg_atomic(a, peg_tag(a, "tool-close", close));
    size_t call = peg_rule(a, "tool-call", peg_sequence(a, v, 9), 1);

    size_t t[3];
    t[0] = peg_zero_or_more(a, call);
    t[1] = peg_optional(a, peg_literal_c(a, "<|end|>"));
    t[2] = peg_end(a);
    size_t tail = peg_sequence(a, t, 3);

    size_t e[8];
    e[0] = peg_python_value(a);
    e[1] = peg_marker(a);
    e[2] = peg_quoted_string(a);
    e[3] = peg_json_member(a, "k", peg_json_number(a));
    size_t s[2];
    s[0] = peg_until(a, "END", 3);
    s[1] = peg_literal_c(a, "END");
    peg_str endw = { "END", 3 };
    e[4] = peg_ac(a, peg_sequence(a, s, 2), &endw, 1);
    e[5] = peg_repeat(a, peg_chars(a, "[^\\n\\x41-\\u00e9]", 0, 3), 2, 5);
    e[6] = peg_peek(a, peg_any(a));
    e[7] = peg_negate(a, peg_start(a));
    size_t extra = peg_choice(a, e, 8);

    size_t alt[2];
    alt[0] = tail;
    alt[1] = peg_rule(a, "extra", extra, 0);
    size_t r[3];
    r[0] = think;
    r[1] = content;
    r[2] = peg_choice(a, alt, 2);
    return peg_sequence(a, r, 3);
}

static const char lazy_grammar[] =
    "json-array ::= \"[\" space (\"]\" | json-value (space \",\" space json-value)* space \"]\")\n"
    "json-bool ::= \"true\" | \"false\"\n"
    "json-null ::= \"null\"\n"
    "json-number ::= \"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ((\"e\" | \"E\") [+-]? [0-9]+)?\n"
    "json-object ::= \"{\" space (\"}\" | json-string space \":\" space json-value (space \",\" space json-string space \":\" space json-value)* space \"}\")\n"
    "json-string ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" ( [\"\\\\/ bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\"\n"
    "json-value ::= json-object | json-array | json-string | json-number | json-bool | json-null\n"
    "root ::= tool-call\n"
    "space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n"
    "tool-call ::= \"<tool_call>\" space \"{\\\"name\\\": \\\"\" [a-z_]{1,16} \"\\\", \\\"arguments\\\": \" json-value \"}\" space \"</tool_call>\"\n";

static const char *parse_in[4] = {
    "<think>hm</think> Hi<tool_call>{\"name\": \"get_x\", \"arguments\": {\"a\": [1, 2.5, \"s\"]}}</tool_call><|end|>",
    "<think>hm</think> Hi<tool_call>{\"name\": \"get_x\", \"arguments\": {\"a\": [1, 2.",
    "plain\xff\xfe text",
    "<think>open",
};
static const char *parse_want[4] = {
    "{\"role\":\"assistant\",\"content\":\"Hi\",\"reasoning_content\":\"hm\",\"tool_calls\":[{\"name\":\"get_x\",\"arguments\":\"{\\\"a\\\": [1, 2.5, \\\"s\\\"]}\",\"id\":\"\"}]}",
    "{\"role\":\"assistant\",\"content\":\"Hi\",\"reasoning_content\":\"hm\",\"tool_calls\":[{\"name\":\"get_x\",\"arguments\":\"{\\\"a\\\": [1, 2.\",\"id\":\"\"}]}",
    "{\"role\":\"assistant\",\"content\":\"plain\xef\xbf\xbd\xef\xbf\xbd text\",\"reasoning_content\":\"\",\"tool_calls\":[]}",
    "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"open\",\"tool_calls\":[]}",
};

TEST(peg_builder_matches_b11669)
{
    peg_arena a;
    char err[256], sha[65];
    peg_init(&a);
    size_t root = build_b11669_case(&a);
    CHECK_INT(peg_build(&a, root, err, sizeof err), 0);
    CHECK_INT(a.n, 231);
    jbuf b;
    jbuf_init(&b);
    peg_save(&a, &b);
    CHECK_INT(b.len, 10675);
    hex_sha(b.p, b.len, sha);
    CHECK_STR(sha, "1c5b3c2db7b4a2a887a31fbefa01e7970d5a446202e09c9944b5ad95f247555e");
    const char *rules = b.p ? strstr(b.p, ",\"rules\":") : NULL;
    CHECK(rules != NULL);
    CHECK_STR(rules, ",\"rules\":{\"json-string\":29,\"json-object\":44,\"json-array\":61,\"json-number\":87,\"json-bool\":94,"
                     "\"json-null\":99,\"json-value\":102,\"tool-call\":111,\"double-quoted-string\":131,"
                     "\"single-quoted-string\":139,\"python-string\":142,\"python-dict\":157,\"python-array\":174,"
                     "\"python-bool\":183,\"python-none\":188,\"python-value\":191,\"quoted-string\":209,\"extra\":227},"
                     "\"root\":230}");

    /* load(save(x)) saves the same bytes */
    peg_arena l;
    CHECK_INT(peg_load(&l, b.p, b.len, err, sizeof err), 0);
    jbuf b2;
    jbuf_init(&b2);
    peg_save(&l, &b2);
    CHECK(b2.len == b.len && memcmp(b2.p, b.p, b.len) == 0);
    jbuf_free(&b2);
    peg_free(&l);

    char *g = NULL;
    size_t gl = 0;
    CHECK_INT(peg_build_grammar(&a, 0, &g, &gl), JSON_SCHEMA_OK);
    CHECK_INT(gl, 3349);
    hex_sha(g, gl, sha);
    CHECK_STR(sha, "a2646576c6eca194d247ba8085871927956c7b917ebae5e85d9e8d3a0e3f8d2e");
    free(g);
    CHECK_INT(peg_build_grammar(&a, 1, &g, &gl), JSON_SCHEMA_OK);
    CHECK_STR(g, lazy_grammar);
    free(g);

    jbuf_reset(&b);
    peg_dump(&a, a.root, &b);
    CHECK_INT(b.len, 2938);
    hex_sha(b.p, b.len, sha);
    CHECK_STR(sha, "239e28cf23b4decfa6de2b96cfcbef396173b0e65f7dfe40dfb5b3309ddebcd6");

    for (int i = 0; i < 4; i++) {
        for (int partial = 0; partial < 2; partial++) {
            chat_msg m;
            CHECK_INT(chat_peg_parse(&a, CHAT_FORMAT_PEG_NATIVE, "", 0, parse_in[i], strlen(parse_in[i]), partial, &m, err, sizeof err), 0);
            jbuf_reset(&b);
            chat_msg_put_json(&m, &b);
            CHECK_STR(b.p, parse_want[i]);
            chat_msg_free(&m);
        }
    }
    jbuf_free(&b);
    peg_free(&a);
}

TEST(peg_builder_flattens_and_cleans_names)
{
    peg_arena a;
    char err[128];
    peg_init(&a);
    size_t x = peg_literal_c(&a, "x"), y = peg_literal_c(&a, "y");
    size_t s = peg_seq2(&a, x, y);
    size_t s2 = peg_seq2(&a, s, x);                 /* Sequence(x, y) + x is Sequence(x, y, x) */
    CHECK_INT(a.p[s2].nkids, 3);
    CHECK_INT(a.p[s2].kids[2], x);
    size_t c = peg_alt2(&a, peg_alt2(&a, x, y), s);  /* choices flatten, sequences stay */
    CHECK_INT(a.p[c].nkids, 3);
    size_t r = peg_rule(&a, "tool call: get.weather!", s2, 1);
    CHECK_INT(a.p[r].kind, PEG_REF);
    CHECK_STR(a.p[r].str.s, "tool-call-get-weather-");
    CHECK(peg_rule_id(&a, "tool-call-get-weather-", 22) != PEG_INVALID);
    size_t ch = peg_chars(&a, "[^a-c\\x41\\u00e9\\]]", 1, -1);
    CHECK_INT(a.p[ch].negated, 1);
    CHECK_INT(a.p[ch].nranges, 4);
    CHECK_INT(a.p[ch].ranges[0].start, 'a');
    CHECK_INT(a.p[ch].ranges[0].end, 'c');
    CHECK_INT(a.p[ch].ranges[1].start, 0x41);
    CHECK_INT(a.p[ch].ranges[2].start, 0xe9);
    CHECK_INT(a.p[ch].ranges[3].start, ']');
    CHECK_INT(peg_build(&a, c, err, sizeof err), 0);
    CHECK_INT(a.root, c);
    peg_free(&a);
}

static void load_err(const char *text, const char *want)
{
    peg_arena a;
    char err[256];
    CHECK_INT(peg_load(&a, text, strlen(text), err, sizeof err), -1);
    CHECK_STR(err, want);
}

TEST(peg_load_refuses_with_reasons)
{
    load_err("{\"parsers\":[{\"type\":\"bogus\"}],\"rules\":{},\"root\":0}", "Unknown parser type: bogus");
    load_err("{\"rules\":{},\"root\":0}", "JSON missing or invalid 'parsers' array");
    load_err("{\"parsers\":[],\"root\":0}", "JSON missing or invalid 'rules' object");
    load_err("{\"parsers\":[],\"rules\":{}}", "JSON missing 'root' field");
    load_err("{\"parsers\":[{\"type\":\"any\"}],\"rules\":{\"r\":4},\"root\":0}", "Rule 'r' references invalid parser ID: 4");
    load_err("{\"parsers\":[{\"type\":\"any\"}],\"rules\":{},\"root\":3}", "Root references invalid parser ID: 3");
    load_err("{\"parsers\":[{\"type\":\"tag\",\"child\":7,\"tag\":\"x\"}],\"rules\":{},\"root\":0}",
             "parser 0 references an invalid parser ID");
    load_err("{\"parsers\":[{\"type\":\"ref\",\"name\":\"nope\"}],\"rules\":{},\"root\":0}", "Rule not found: nope");
    load_err("{\"parsers\":[{\"type\":\"ac\",\"child\":0,\"delimiters\":[]}],\"rules\":{},\"root\":0}",
             "ac parser requires 'child' and a non-empty 'delimiters' array");
    load_err("{\"parsers\":[{\"type\":\"string\",\"delimiter\":\"\"}],\"rules\":{},\"root\":0}", "string parser delimiter is empty.");
}

typedef struct { const peg_arena *a; int rc; char err[256]; } deep_job;

static void *deep_parse(void *arg)
{
    deep_job *j = arg;
    size_t n = 20000;
    char *deep = malloc(n);
    peg_ast ast;
    peg_result r;
    if (!deep) { j->rc = -2; return NULL; }
    memset(deep, '[', n);
    j->rc = peg_parse(j->a, deep, n, 0, PEG_LENIENT, &ast, &r, j->err, sizeof j->err);
    peg_ast_free(&ast);
    free(deep);
    return NULL;
}

TEST(peg_parse_partial_and_bounds)
{
    peg_arena a;
    peg_ast ast;
    peg_result r;
    char err[256];
    peg_init(&a);
    size_t lit = peg_literal_c(&a, "<tool_call>");
    CHECK_INT(peg_build(&a, lit, err, sizeof err), 0);
    CHECK_INT(peg_parse(&a, "<tool", 5, 0, PEG_LENIENT, &ast, &r, err, sizeof err), 0);
    CHECK_INT(r.type, PEG_NEED_MORE);              /* a prefix of the literal: more input may come */
    CHECK_INT(r.end, 5);
    peg_ast_free(&ast);
    CHECK_INT(peg_parse(&a, "<tool", 5, 0, 0, &ast, &r, err, sizeof err), 0);
    CHECK_INT(r.type, PEG_FAIL);                   /* not lenient: the input is complete */
    peg_ast_free(&ast);
    peg_free(&a);

    /* a deeply nested JSON answer is refused, not a stack overflow, on a server thread's 1 MiB stack
     * (b11669 has no bound: its recursion follows the nesting) */
    peg_init(&a);
    size_t j = peg_json(&a);
    CHECK_INT(peg_build(&a, j, err, sizeof err), 0);
    deep_job job = { &a, 0, "" };
    pthread_attr_t at;
    pthread_t th;
    pthread_attr_init(&at);
#if defined(__SANITIZE_ADDRESS__)
    pthread_attr_setstacksize(&at, 8u << 20);      /* ASan's frames are several times larger */
#else
    pthread_attr_setstacksize(&at, 1u << 20);
#endif
    CHECK_INT(pthread_create(&th, &at, deep_parse, &job), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&at);
    CHECK_INT(job.rc, -1);
    CHECK(strstr(job.err, "PEG_MAX_DEPTH") != NULL);

    chat_msg m;
    CHECK_INT(chat_peg_parse(&a, CHAT_FORMAT_PEG_NATIVE, "", 0, "x", 1, 0, &m, err, sizeof err), CHAT_PEG_NO_MATCH);
    CHECK_STR(err, "The model produced output that does not match the expected peg-native format");
    chat_msg_free(&m);
    peg_free(&a);

    /* no arena: b11669's content(rest()) + end(), the generation prompt included */
    CHECK_INT(chat_peg_parse(NULL, CHAT_FORMAT_CONTENT_ONLY, "", 0, "a\xc3", 2, 1, &m, err, sizeof err), 0);
    CHECK_INT(m.content.len, 1);                   /* the cut character waits for its end */
    chat_msg_free(&m);
}

TEST(chat_peg_mapper_tagged_arguments)
{
    /* tool-open, tool-name (trailing space trimmed), tool-arg-name / tool-arg-value pairs, tool-close:
     * the arguments are written as JSON text, Python literals made JSON, the braces closed */
    peg_arena a;
    char err[256];
    peg_init(&a);
    size_t v[12];
    v[0] = peg_atomic(&a, peg_tag(&a, "tool-open", peg_literal_c(&a, "<f=")));
    v[1] = peg_atomic(&a, peg_tag(&a, "tool-name", peg_until(&a, ">", 1)));
    v[2] = peg_literal_c(&a, ">");
    v[3] = peg_atomic(&a, peg_tag(&a, "tool-arg-name", peg_until(&a, "=", 1)));
    v[4] = peg_literal_c(&a, "=");
    v[5] = peg_tag(&a, "tool-arg-value", peg_until(&a, ";", 1));
    v[6] = peg_literal_c(&a, ";");
    v[7] = peg_atomic(&a, peg_tag(&a, "tool-arg-name", peg_until(&a, "=", 1)));
    v[8] = peg_literal_c(&a, "=");
    v[9] = peg_tag(&a, "tool-arg-string-value", peg_until(&a, "</f>", 4));
    v[10] = peg_atomic(&a, peg_tag(&a, "tool-arg-close", peg_eps(&a)));
    v[11] = peg_atomic(&a, peg_tag(&a, "tool-close", peg_literal_c(&a, "</f>")));
    size_t call = peg_tag(&a, "tool", peg_sequence(&a, v, 12));
    CHECK_INT(peg_build(&a, call, err, sizeof err), 0);
    const char *in = "<f=get weather \t> x ={'a': True, \"b\": None};city=Par\"is</f>";
    chat_msg m;
    CHECK_INT(chat_peg_parse(&a, CHAT_FORMAT_PEG_NATIVE, "", 0, in, strlen(in), 0, &m, err, sizeof err), 0);
    CHECK_INT(m.ncalls, 1);
    CHECK_STR(m.calls[0].name.p, "get weather");
    CHECK_STR(m.calls[0].arguments.p, "{\"x\":{\"a\": true, \"b\": null},\"city\":\"Par\\\"is\"}");
    chat_msg_free(&m);
    peg_free(&a);
}

static void set_msg(chat_msg *m, const char *content, const char *name, const char *args)
{
    chat_msg_init(m);
    jbuf_puts(&m->content, content);
    if (name) {
        m->calls = calloc(1, sizeof *m->calls);
        m->ncalls = m->cap = 1;
        jbuf_init(&m->calls[0].name);
        jbuf_init(&m->calls[0].arguments);
        jbuf_init(&m->calls[0].id);
        jbuf_puts(&m->calls[0].name, name);
        jbuf_puts(&m->calls[0].arguments, args);
    }
}

TEST(chat_msg_diffs_as_b11669)
{
    chat_msg a, b, c, e;
    chat_msg_delta *d;
    jbuf err;
    jbuf_init(&err);
    set_msg(&a, "Hel", NULL, NULL);
    set_msg(&b, "Hello", "get_x", "{");
    set_msg(&c, "Hello", "get_x", "{\"a\"");
    set_msg(&e, "Hex", NULL, NULL);
    int n = chat_msg_diffs(&a, &b, &d, &err);
    CHECK_INT(n, 2);                                /* the content's growth, then the new call */
    if (n == 2) {
        CHECK_STR(d[0].content_delta.p, "lo");
        CHECK_U64(d[0].tool_index, PEG_INVALID);
        CHECK_U64(d[1].tool_index, 0);
        CHECK_STR(d[1].call.name.p, "get_x");
        CHECK_STR(d[1].call.arguments.p, "{");
    }
    chat_msg_deltas_free(d, n > 0 ? (size_t)n : 0);
    n = chat_msg_diffs(&b, &c, &d, &err);
    CHECK_INT(n, 1);                                /* the last call's arguments grow; name unchanged, not repeated */
    if (n == 1) {
        CHECK_STR(d[0].call.arguments.p, "\"a\"");
        CHECK_INT(d[0].call.name.len, 0);
    }
    chat_msg_deltas_free(d, n > 0 ? (size_t)n : 0);
    n = chat_msg_diffs(&b, &a, &d, &err);           /* content shrank to a prefix: no delta; a call vanished */
    CHECK_INT(n, -1);
    CHECK_STR(err.p, "Invalid diff: now finding less tool calls!\n  Previous (1):\n    - name: 'get_x', args: '{'\n"
                     "  Current (0):\n  Current msg text content:\nHel\n");
    n = chat_msg_diffs(&a, &e, &d, &err);
    CHECK_INT(n, -1);
    CHECK_STR(err.p, "Invalid diff: 'Hel' not found at start of 'Hex'");
    chat_msg_free(&a);
    chat_msg_free(&b);
    chat_msg_free(&c);
    chat_msg_free(&e);
    jbuf_free(&err);
}

/* the C++ program's second arena: b11669's common_chat_peg_builder::tag_with_safe_content, permute,
 * prefix and optspace (called on the library), its text form and grammar */
TEST(chat_peg_builder_helpers_match_b11669)
{
    peg_arena a;
    char err[128], sha[65];
    peg_init(&a);
    size_t v[7];
    size_t m = peg_literal_c(&a, "<tool_call>");
    v[0] = chat_peg_tag_with_safe_content(&a, "safe", "<tool_call>", m);
    size_t x = peg_literal_c(&a, "X");
    v[1] = chat_peg_tag_with_safe_content(&a, "safe2", "", x);
    size_t abc[3];
    abc[0] = peg_literal_c(&a, "a");
    abc[1] = peg_literal_c(&a, "b");
    abc[2] = peg_literal_c(&a, "c");
    v[2] = chat_peg_permute(&a, "perm", abc, 3);
    size_t z = peg_literal_c(&a, "z");
    v[3] = chat_peg_permute(&a, "one", &z, 1);
    v[4] = chat_peg_prefix(&a, "<tool_call>name", "name");
    v[5] = chat_peg_prefix(&a, "", "x");
    v[6] = chat_peg_optspace(&a, " \n<tag> \n");
    CHECK_INT(peg_build(&a, peg_sequence(&a, v, 7), err, sizeof err), 0);
    jbuf b;
    jbuf_init(&b);
    peg_save(&a, &b);
    CHECK_INT(b.len, 3648);
    hex_sha(b.p, b.len, sha);
    CHECK_STR(sha, "5c08e2b0983ed749ef86e0659ec4cf81db81d1849b1794149a8c2cca700b52e0");
    const char *rules = b.p ? strstr(b.p, ",\"rules\":") : NULL;
    CHECK_STR(rules, ",\"rules\":{\"safe\":8,\"safe2\":15,\"perm-4\":28,\"perm-2\":36,\"perm-6\":40,\"perm-1\":51,\"perm-5\":55,"
                     "\"perm-3\":64,\"perm-7\":68},\"root\":89}");
    char *g = NULL;
    size_t gl = 0;
    CHECK_INT(peg_build_grammar(&a, 0, &g, &gl), JSON_SCHEMA_OK);
    CHECK_INT(gl, 1049);
    hex_sha(g, gl, sha);
    CHECK_STR(sha, "99eb449d9965b062c408e0ceb13c95c825aa7e9bff54261362f5d25a9ed6a547");
    CHECK(g && strstr(g, "perm-7 ::= \"a\" perm-6 | \"b\" perm-5 | \"c\" perm-3\n") != NULL);
    free(g);
    /* the atomic tags */
    size_t t = chat_peg_tag(&a, "tool-name", z), c = chat_peg_tag(&a, "content", z);
    CHECK_INT(a.p[t].kind, PEG_ATOMIC);
    CHECK_INT(a.p[a.p[t].child].kind, PEG_TAG);
    CHECK_INT(a.p[c].kind, PEG_TAG);
    jbuf_free(&b);
    peg_free(&a);
}
