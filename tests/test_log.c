/*
 * test_log.c -- base/log: both forms of a line (text members, quoting, the
 * refusal last; the JSON object's members), the ring's 200 newest lines,
 * the threshold; base/progress: the line's words for bytes and tokens, and
 * no handle when progress is off.
 */
#include "test.h"
#include "base/json.h"
#include "base/log.h"
#include "base/progress.h"

#include <string.h>

/* The ring's newest text line. */
static const char *last_text(void)
{
    static char buf[1024];
    jbuf b;
    jbuf_init(&b);
    bk_log_ring_text(&b);
    buf[0] = 0;
    if (b.len >= 2) {
        size_t end = b.len - 1, start = end;
        while (start > 0 && b.p[start - 1] != '\n') start--;
        snprintf(buf, sizeof buf, "%.*s", (int)(end - start), b.p + start);
    }
    jbuf_free(&b);
    return buf;
}

/* The ring as parsed JSON (caller frees). */
static json_value *ring(void)
{
    char err[128];
    jbuf b;
    jbuf_init(&b);
    bk_log_ring_json(&b);
    json_value *v = json_parse(b.p, b.len, err, sizeof err);
    jbuf_free(&b);
    return v;
}

static void quiet_log(int verbosity)
{
    bk_log_opts o;
    char err[128];
    bk_log_opts_init(&o);
    o.disabled = 1;   /* nothing on stderr; the ring is still kept */
    o.verbosity = verbosity;
    CHECK_INT(bk_log_setup(&o, err, sizeof err), 0);
}

TEST(log_event_forms)
{
    quiet_log(BK_LOG_INFO);
    bk_log_kv kv[] = {
        {.key = "route", .s = "/completion", .json_only = 1},
        {.key = "model", .s = "a b.gguf"},
        {.key = "prompt_tokens", .i = 12},
        {.key = "ms", .d = 3.25, .is_ms = 1},
        {.key = "reason", .s = "n_indent: not reproduced"},
    };
    bk_log_event(BK_LOG_WARN, "request", "bankml serve: POST /completion 400", kv, 5);
    CHECK_STR(last_text(), "bankml serve: POST /completion 400 model=\"a b.gguf\" prompt_tokens=12 ms=3.2 refused: "
                           "n_indent: not reproduced");
    json_value *r = ring();
    CHECK(r && r->type == JSON_ARRAY && r->n > 0);
    if (r && r->n) {
        const json_value *o = r->items[r->n - 1];
        const json_value *t = json_get(o, "type"), *lv = json_get(o, "level"), *rt = json_get(o, "route"),
                         *pt = json_get(o, "prompt_tokens"), *re = json_get(o, "reason"), *tm = json_get(o, "time");
        CHECK(t && t->type == JSON_STRING && !strcmp(t->str, "request"));
        CHECK(lv && lv->type == JSON_STRING && !strcmp(lv->str, "warn"));
        CHECK(rt && rt->type == JSON_STRING && !strcmp(rt->str, "/completion"));
        CHECK(pt && pt->type == JSON_NUMBER && !strcmp(pt->str, "12"));
        CHECK(re && re->type == JSON_STRING && !strcmp(re->str, "n_indent: not reproduced"));
        CHECK(tm && tm->type == JSON_NUMBER && !strcmp(tm->str, "0"));   /* llama-server's: 0 without timestamps */
        CHECK_STR(o->keys[0], "type");
        CHECK_STR(o->keys[3], "msg");
    }
    json_free(r);
    bk_log(BK_LOG_GENERIC, "start %d", 7);
    CHECK_STR(last_text(), "start 7");
}

TEST(log_ring_keeps_200)
{
    quiet_log(BK_LOG_INFO);
    for (int i = 0; i < 250; i++) bk_log(BK_LOG_INFO, "line %d", i);
    json_value *r = ring();
    CHECK(r && r->n == BK_LOG_RING);
    if (r && r->n == BK_LOG_RING) {
        const json_value *m0 = json_get(r->items[0], "msg"), *m1 = json_get(r->items[BK_LOG_RING - 1], "msg");
        CHECK(m0 && !strcmp(m0->str, "line 50"));
        CHECK(m1 && !strcmp(m1->str, "line 249"));
    }
    json_free(r);
}

TEST(log_threshold)
{
    quiet_log(BK_LOG_WARN);
    CHECK_INT(bk_log_on(BK_LOG_INFO), 0);
    CHECK_INT(bk_log_on(BK_LOG_WARN), 1);
    CHECK_INT(bk_log_on(BK_LOG_GENERIC), 1);
    quiet_log(BK_LOG_INFO);
    CHECK_INT(bk_log_on(BK_LOG_DEBUG), 0);
    CHECK_INT(bk_log_on(BK_LOG_INFO), 1);
}

TEST(progress_words)
{
    char out[200];
    bk_progress_format(out, sizeof out, "hashing x.gguf", 3u << 20, 12u << 20, "B", 0.5);
    CHECK_STR(out, "hashing x.gguf   25% 3.0 MiB of 12.0 MiB, 6.0 MiB/s, 1.5 s left");
    bk_progress_format(out, sizeof out, "prompt", 256, 1024, "tokens", 2.0);
    CHECK_STR(out, "prompt   25% 256 tokens of 1024 tokens, 128 tokens/s, 6.0 s left");
    bk_progress_format(out, sizeof out, "hashing y", 0, 5000, "B", 0.0);
    CHECK_STR(out, "hashing y    0% 0 B of 4.9 KiB");
    bk_progress_format(out, sizeof out, "loading z", 0, 0, "B", 1.25);
    CHECK_STR(out, "loading z  1.2 s");
    bk_progress_format(out, sizeof out, "hashing w", 100, 100, "B", 1.0);
    CHECK_STR(out, "hashing w  100% 100 B of 100 B, 100 B/s");
}

TEST(progress_off_without_enable)
{
    bk_progress_enable(0);
    int h = bk_progress_begin("nothing", 10, "B");
    CHECK_INT(h, 0);
    bk_progress_update(h, 5);   /* harmless on 0 */
    bk_progress_end(h);
}
