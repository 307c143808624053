/* test_ollama.c -- ollama.c's pure parts: durations, keep_alive, names,
 * Ollama v0.13.3's num_ctx fitting (with its system-message quirk) and the
 * Modelfile parser. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "api/ollama.h"
#include "test.h"

static int64_t dur(const char *s)
{
    int64_t ms = 12345;
    if (ollama_parse_duration(s, strlen(s), &ms) != 0) return -999999;
    return ms;
}

TEST(ollama_durations)
{
    CHECK_INT(dur("5m"), 300000);
    CHECK_INT(dur("1h30m"), 5400000);
    CHECK_INT(dur("2.5s"), 2500);
    CHECK_INT(dur("-1m"), -60000);
    CHECK_INT(dur("300ms"), 300);
    CHECK_INT(dur("1m30s"), 90000);
    CHECK_INT(dur("0"), 0);
    CHECK_INT(dur("30"), 30000);
    CHECK_INT(dur("-1"), -1000);
    CHECK_INT(dur("1.5"), 1500);
    CHECK_INT(dur("1500us"), 1);
    CHECK_INT(dur("5"), 5000);
    CHECK_INT(dur("5x"), -999999);
    CHECK_INT(dur("m"), -999999);
    CHECK_INT(dur(""), -999999);
    CHECK_INT(dur("1h-5m"), -999999);
    CHECK_INT(dur(" 5m"), -999999);
}

static int64_t ka(const char *json, int *ok)
{
    char err[256];
    int64_t ms = 77;
    json_value *v = json_parse(json, strlen(json), err, sizeof err);
    *ok = ollama_keep_alive(v, 300000, &ms, err, sizeof err) == 0;
    json_free(v);
    return ms;
}

TEST(ollama_keep_alive_values)
{
    int ok;
    CHECK_INT(ka("null", &ok), 300000);
    CHECK(ok);
    CHECK_INT(ka("\"\"", &ok), 300000);
    CHECK_INT(ka("0", &ok), 0);
    CHECK(ok);
    CHECK_INT(ka("-1", &ok), -1);
    CHECK_INT(ka("\"-5m\"", &ok), -1);
    CHECK_INT(ka("10", &ok), 10000);
    CHECK_INT(ka("\"10m\"", &ok), 600000);
    ka("\"soon\"", &ok);
    CHECK(!ok);
    ka("true", &ok);
    CHECK(!ok);
    ka("[1]", &ok);
    CHECK(!ok);
}

TEST(ollama_names)
{
    char out[140], err[256];
    CHECK(ollama_name_matches("brief", "brief"));
    CHECK(ollama_name_matches("brief", "Brief:LATEST"));
    CHECK(!ollama_name_matches("brief", "brief:v2"));
    CHECK(!ollama_name_matches("brief", "brie"));
    CHECK_INT(ollama_name_check("My-Model.v2:latest", out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "my-model.v2");
    CHECK_INT(ollama_name_check("x:v2", out, sizeof out, err, sizeof err), -1);
    CHECK_INT(ollama_name_check("a/b", out, sizeof out, err, sizeof err), -1);
    CHECK_INT(ollama_name_check("m.gguf", out, sizeof out, err, sizeof err), -1);
    CHECK_INT(ollama_name_check("", out, sizeof out, err, sizeof err), -1);
    char longname[200];
    memset(longname, 'a', 129);
    longname[129] = 0;
    CHECK_INT(ollama_name_check(longname, out, sizeof out, err, sizeof err), -1);
    longname[128] = 0;
    CHECK_INT(ollama_name_check(longname, out, sizeof out, err, sizeof err), 0);
}

/* Ollama's model.ParseName(s).IsValid(), case by case from
 * types/model/name.go: parts, missing parts, characters per part. */
TEST(ollama_name_validity)
{
    CHECK(ollama_name_valid("nope"));
    CHECK(ollama_name_valid("Qwen3-e128-F32.gguf"));
    CHECK(ollama_name_valid("llama3:latest"));
    CHECK(ollama_name_valid("llama3:8b-q4.0"));
    CHECK(ollama_name_valid("_x"));
    CHECK(ollama_name_valid("library/llama3"));
    CHECK(ollama_name_valid("registry.ollama.ai/library/llama3:latest"));
    CHECK(ollama_name_valid("https://host:8080/ns/m:t"));
    CHECK(!ollama_name_valid(""));
    CHECK(!ollama_name_valid(NULL));
    CHECK(!ollama_name_valid("a b"));
    CHECK(!ollama_name_valid("-x"));
    CHECK(!ollama_name_valid(".x"));
    CHECK(!ollama_name_valid("x:"));              /* tag cut empty: !MISSING! */
    CHECK(!ollama_name_valid(":x"));
    CHECK(!ollama_name_valid("x:y:z"));           /* ':' in the model part */
    CHECK(!ollama_name_valid("/x"));
    CHECK(!ollama_name_valid("x/"));
    CHECK(!ollama_name_valid("a.b/x"));           /* '.' in the namespace */
    CHECK(!ollama_name_valid("/work/models/x.gguf"));
    CHECK(!ollama_name_valid("a/b/c/d"));         /* '/' left in the host */
    CHECK(!ollama_name_valid("caf\xc3\xa9"));
    char big[100];
    memset(big, 'a', 81);
    big[81] = 0;
    CHECK(!ollama_name_valid(big));
    big[80] = 0;
    CHECK(ollama_name_valid(big));
}

/* Go's strconv.Quote on the names Ollama's messages quote. */
TEST(ollama_go_quoting)
{
    char q[64];
    ollama_go_quote("nope", q, sizeof q);
    CHECK_STR(q, "\"nope\"");
    ollama_go_quote("", q, sizeof q);
    CHECK_STR(q, "\"\"");
    ollama_go_quote("a\"b\\c", q, sizeof q);
    CHECK_STR(q, "\"a\\\"b\\\\c\"");
    ollama_go_quote("t\tn\n\x01\x7f", q, sizeof q);
    CHECK_STR(q, "\"t\\tn\\n\\x01\\x7f\"");
    ollama_go_quote("caf\xc3\xa9", q, sizeof q);               /* printable UTF-8 kept */
    CHECK_STR(q, "\"caf\xc3\xa9\"");
    ollama_go_quote("x\xff\xc3", q, sizeof q);                 /* not UTF-8: bytes */
    CHECK_STR(q, "\"x\\xff\\xc3\"");
    ollama_go_quote("\xe2\x80\xa8\xc2\x85", q, sizeof q);     /* U+2028, U+0085 */
    CHECK_STR(q, "\"\\u2028\\u0085\"");
    ollama_go_quote("\xc0\xaf", q, sizeof q);                 /* overlong '/' */
    CHECK_STR(q, "\"\\xc0\\xaf\"");
    char small[8];
    ollama_go_quote("abcdefghij", small, sizeof small);         /* cut, still quoted */
    CHECK_STR(small, "\"abcde\"");
}

/* a synthetic count: each message costs cost[i] tokens, plus 1 */
static const size_t *g_cost;
static int fake_count(void *ud, const size_t *idx, size_t n, size_t *tokens, char *err, size_t errlen)
{
    (void)ud;
    (void)err;
    (void)errlen;
    size_t t = 1;
    for (size_t i = 0; i < n; i++) t += g_cost[idx[i]];
    *tokens = t;
    return 0;
}

static size_t fit(const int *sys, const size_t *cost, size_t n, size_t num_ctx, size_t *keep, size_t *dropped)
{
    size_t nk = 0;
    char err[64];
    g_cost = cost;
    if (ollama_fit(sys, n, num_ctx, fake_count, NULL, keep, &nk, dropped, err, sizeof err) != 0) return 999;
    return nk;
}

TEST(ollama_fit_as_ollama)
{
    size_t keep[8], dropped;
    /* system, user, assistant, user, assistant, user */
    int sys[6] = {1, 0, 0, 0, 0, 0};
    size_t cost[6] = {5, 10, 10, 10, 10, 10};
    /* everything fits: 1 + 55 = 56 */
    CHECK_INT(fit(sys, cost, 6, 56, keep, &dropped), 6);
    CHECK_INT(dropped, 0);
    /* one drop: the first user message goes, the system stays */
    CHECK_INT(fit(sys, cost, 6, 55, keep, &dropped), 5);
    CHECK_INT(dropped, 1);
    CHECK_INT(keep[0], 0);
    CHECK_INT(keep[1], 2);
    /* several drops: 1 + 5 + 20 = 26 keeps the last two */
    CHECK_INT(fit(sys, cost, 6, 26, keep, &dropped), 3);
    CHECK_INT(dropped, 3);
    CHECK_INT(keep[0], 0);
    CHECK_INT(keep[1], 4);
    CHECK_INT(keep[2], 5);
    /* nothing fits: the last message stays alone with the system before it */
    CHECK_INT(fit(sys, cost, 6, 3, keep, &dropped), 2);
    CHECK_INT(keep[0], 0);
    CHECK_INT(keep[1], 5);
    /* the quirk: a system message that is itself the first one cut is dropped */
    int sys2[4] = {0, 0, 1, 0};
    size_t cost2[4] = {10, 10, 5, 10};
    /* [2,3] = 16 > 12: the system message at 2 is the first cut and goes too */
    CHECK_INT(fit(sys2, cost2, 4, 12, keep, &dropped), 1);
    CHECK_INT(keep[0], 3);
    CHECK_INT(dropped, 3);
    /* a system message before the first cut one stays: [1,2,3] = 26 > 21 */
    int sys4[4] = {0, 1, 0, 0};
    size_t cost4[4] = {10, 5, 10, 10};
    CHECK_INT(fit(sys4, cost4, 4, 21, keep, &dropped), 2);
    CHECK_INT(keep[0], 1);
    CHECK_INT(keep[1], 3);
    /* a single message is never measured away */
    int sys3[1] = {0};
    size_t cost3[1] = {100};
    CHECK_INT(fit(sys3, cost3, 1, 5, keep, &dropped), 1);
    CHECK_INT(keep[0], 0);
}

TEST(ollama_modelfile_parsing)
{
    ollama_modelfile mf;
    char err[256];
    const char *t = "\xef\xbb\xbf# a comment\r\nfrom qwen3-e128-f32\r\nSYSTEM \"\"\"Be\nbrief.\"\"\"\n"
                    "PARAMETER Temperature 0.5\nparameter stop \"<|im_end|>\"\nMESSAGE user Hi there\n"
                    "message assistant \"Hello!\"\n";
    CHECK_INT(ollama_modelfile_parse(t, strlen(t), &mf, err, sizeof err), 0);
    CHECK_INT(mf.n, 6);
    if (mf.n == 6) {
        CHECK_STR(mf.cmds[0].name, "from");
        CHECK_STR(mf.cmds[0].value, "qwen3-e128-f32");
        CHECK_STR(mf.cmds[1].name, "system");
        CHECK_STR(mf.cmds[1].value, "Be\nbrief.");
        CHECK_STR(mf.cmds[2].key, "temperature");
        CHECK_STR(mf.cmds[2].value, "0.5");
        CHECK_STR(mf.cmds[3].value, "<|im_end|>");
        CHECK_STR(mf.cmds[4].key, "user");
        CHECK_STR(mf.cmds[4].value, "Hi there");
        CHECK_STR(mf.cmds[5].value, "Hello!");
    }
    ollama_modelfile_free(&mf);
    const char *bad1 = "FROM x\nFOO bar\n";
    CHECK_INT(ollama_modelfile_parse(bad1, strlen(bad1), &mf, err, sizeof err), -1);
    CHECK(strstr(err, "line 2") != NULL);
    const char *bad2 = "FROM x\nSYSTEM \"\"\"never closed\n";
    CHECK_INT(ollama_modelfile_parse(bad2, strlen(bad2), &mf, err, sizeof err), -1);
    const char *bad3 = "FROM\n";
    CHECK_INT(ollama_modelfile_parse(bad3, strlen(bad3), &mf, err, sizeof err), -1);
    const char *bad4 = "PARAMETER temperature\n";
    CHECK_INT(ollama_modelfile_parse(bad4, strlen(bad4), &mf, err, sizeof err), -1);
}

TEST(ollama_rfc3339_form)
{
    char ts[40];
    ollama_rfc3339((int64_t)1700000000 * 1000000000 + 5, ts);
    CHECK_STR(ts, "2023-11-14T22:13:20.000000005Z");
}
