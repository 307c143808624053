/*
 * status.c -- bankML's own routes about the server: /bankml (what is
 * verified and resident), /metrics (llama-server's --metrics names),
 * /bankml/metrics (the last completions), /bankml/usage (/proc and RAPL),
 * /bankml/status (a page for a browser, /bankml's JSON otherwise) and / (the
 * chat page of api/ui.c for a browser, a line otherwise). See status.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "api/llama_json.h"
#include "api/status.h"
#include "api/ui.h"
#include "base/base.h"
#include "base/log.h"

struct status_api {
    engine *e;
    const char *upstream;
    int metrics_off;           /* llama-server without --metrics */
    int ui_off;                /* llama-server's --no-ui: no chat page at / */
};

/* /bankml's JSON; with_log (/bankml/status): "log", the newest log lines. */
static void bankml_json(serve_resp *resp, status_api *api, int with_log)
{
    engine_status_info st;
    engine_entry en;
    jbuf out;
    jbuf_init(&out);
    engine_status_get(api->e, &st);
    jbuf_puts(&out, "{\"verified\":");
    jbuf_puts(&out, st.verified_json ? st.verified_json : "null");
    jbuf_puts(&out, ",\"model\":");
    if (st.resident >= 0 && engine_entry_get(api->e, (size_t)st.resident, &en) == 0) json_put_cstr(&out, en.path);
    else if (st.verified_json && engine_entry_get(api->e, engine_default(api->e), &en) == 0) json_put_cstr(&out, en.path);
    else jbuf_puts(&out, "null");
    jbuf_puts(&out, ",\"upstream\":");
    json_put_cstr(&out, api->upstream);
    jbuf_puts(&out, ",\"engine\":\"" ENGINE_NAME "\",\"hashed_at\":");
    if (st.hashed_at) jbuf_printf(&out, "%lld", (long long)st.hashed_at);
    else jbuf_puts(&out, "null");
    jbuf_puts(&out, ",\"resident\":");
    if (st.resident >= 0 && engine_entry_get(api->e, (size_t)st.resident, &en) == 0) json_put_cstr(&out, en.name);
    else jbuf_puts(&out, "null");
    jbuf_puts(&out, ",\"models\":[");
    for (size_t i = 0; engine_entry_get(api->e, i, &en) == 0; i++) {
        if (i) jbuf_putc(&out, ',');
        json_put_cstr(&out, en.name);
    }
    jbuf_putc(&out, ']');
    if (with_log) {
        jbuf_puts(&out, ",\"log\":");
        bk_log_ring_json(&out);
    }
    jbuf_putc(&out, '}');
    free(st.verified_json);
    serve_reply_json(resp, 200, &out);
    jbuf_free(&out);
}

static void h_bankml(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    bankml_json(resp, ud, 0);
}

/* GET /metrics: llama-server's --metrics text, the same names, HELP and
 * TYPE lines in its order; values printed as its ostream prints doubles
 * (%g). The gauges cover the time since the previous scrape, as there. */
static void h_metrics(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    if (((status_api *)ud)->metrics_off) {
        static const char off[] = "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. "
                                  "Start it with `--metrics`\",\"type\":\"not_supported_error\"}}";
        serve_reply(resp, 501, SERVE_JSON, off, sizeof off - 1);
        return;
    }
    engine_task_ids(((status_api *)ud)->e, 1);   /* b11669's METRICS task */
    static const struct { const char *name, *help; } cn[] = {
        {"prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens"},
        {"prompt_tokens_cached_total", "Number of prompt tokens reused from the cache"},
        {"prompt_seconds_total", "Total time spent processing prompts"},
        {"tokens_predicted_total", "Number of generation tokens processed"},
        {"tokens_predicted_seconds_total", "Total time spent generating tokens"},
        {"n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding"},
        {"n_tokens_max", "Largest observed sequence length (prompt + generation)"},
        {"spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated"},
        {"spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model"},
        {"spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps"},
        {"prompt_tokens_seconds", "Average prompt throughput in tokens/s"},
        {"predicted_tokens_seconds", "Average generation throughput in tokens/s"},
        {"requests_processing", "Number of requests processing"},
        {"requests_deferred", "Number of requests deferred"},
        {"n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call"},
    };
    double v[15];
    char start[32];
    engine_metrics *met = malloc(sizeof *met);
    if (!met) {
        llama_reply_err(resp, 500, "out of memory");
        return;
    }
    engine_metrics_get(((status_api *)ud)->e, met, 1);
    v[0] = (double)met->prompt.count;
    v[1] = (double)met->cached;
    v[2] = (double)met->prompt.us / 1e6;
    v[3] = (double)met->predict.count;
    v[4] = (double)met->predict.us / 1e6;
    v[5] = (double)met->n_decode;
    v[6] = (double)met->n_tokens_max;
    v[7] = v[8] = v[9] = 0;
    v[10] = engine_bucket_rate(&met->prompt_win);
    v[11] = engine_bucket_rate(&met->predict_win);
    v[12] = met->processing;
    v[13] = met->deferred;
    v[14] = (double)met->n_busy / (met->n_decode > 1 ? (double)met->n_decode : 1.0);
    snprintf(start, sizeof start, "%lld", (long long)met->t_start);
    free(met);
    jbuf out;
    jbuf_init(&out);
    for (size_t i = 0; i < 15; i++)
        jbuf_printf(&out, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %g\n", cn[i].name, cn[i].help,
                    cn[i].name, i < 10 ? "counter" : "gauge", cn[i].name, v[i]);
    serve_resp_header(resp, "Process-Start-Time-Unix", start);
    serve_reply(resp, 200, "text/plain; version=0.0.4", out.p ? out.p : "", out.len);
    jbuf_free(&out);
}

static void put_ms(jbuf *b, const char *key, double ms)
{
    jbuf_printf(b, ",\"%s\":", key);
    if (ms < 0) jbuf_puts(b, "null");
    else json_put_double(b, ms);
}

/* GET /bankml/metrics: the last ENGINE_KEEP_RECORDS completions, oldest
 * first, with totals since start; energy from RAPL where readable (null
 * otherwise). */
static void h_bankml_metrics(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    engine_metrics *met = malloc(sizeof *met);
    jbuf out;
    if (!met) {
        llama_reply_err(resp, 500, "out of memory");
        return;
    }
    engine_metrics_get(((status_api *)ud)->e, met, 0);
    jbuf_init(&out);
    jbuf_printf(&out, "{\"kept\":%zu,\"keep\":%d,\"prompt_tokens\":%llu,\"completion_tokens\":%llu",
                met->n_rec, ENGINE_KEEP_RECORDS, (unsigned long long)met->tot_prompt,
                (unsigned long long)met->tot_completion);
    int measured = met->tot_energy_tokens > 0 || met->tot_energy_j > 0;
    put_ms(&out, "energy_j", measured ? met->tot_energy_j : -1);
    put_ms(&out, "joules_per_token", met->tot_energy_tokens ? met->tot_energy_j / (double)met->tot_energy_tokens : -1);
    jbuf_puts(&out, ",\"records\":[");
    for (size_t k = 0; k < met->n_rec; k++) {
        const engine_record *r = &met->ring[k];
        if (k) jbuf_putc(&out, ',');
        jbuf_printf(&out, "{\"at\":%lld,\"model\":", (long long)r->at);
        json_put_cstr(&out, r->model);
        jbuf_printf(&out, ",\"prompt_tokens\":%zu,\"cached_tokens\":%zu,\"completion_tokens\":%zu", r->prompt,
                    r->cached, r->completion);
        put_ms(&out, "prompt_ms", r->prompt_ms);
        put_ms(&out, "ttft_ms", r->ttft_ms);
        put_ms(&out, "eval_ms", r->eval_ms);
        jbuf_printf(&out, ",\"finish\":\"%s\",\"grammar_ms\":null,\"resampled\":null", r->finish);
        put_ms(&out, "energy_j", r->energy_j);
        put_ms(&out, "prompt_tps", r->prompt_ms > 0 ? (double)(r->prompt - r->cached) / r->prompt_ms * 1e3 : -1);
        put_ms(&out, "eval_tps", r->eval_ms > 0 && r->completion > 1 ? (double)(r->completion - 1) / r->eval_ms * 1e3
                                                                     : -1);
        put_ms(&out, "joules_per_token", r->energy_j >= 0 && r->completion ? r->energy_j / (double)r->completion : -1);
        jbuf_putc(&out, '}');
    }
    jbuf_puts(&out, "]}");
    free(met);
    serve_reply_json(resp, 200, &out);
    jbuf_free(&out);
}

/* ---- /bankml/usage: the machine and this process, from /proc ---- */

static long long meminfo_kb(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* utime + stime in ticks and the resident pages of process pid (0: this one). */
static int pid_stat(long pid, unsigned long long *ticks, long long *rss_pages)
{
    char buf[2048], path[64];
    size_t len;
    if (pid) snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    else snprintf(path, sizeof path, "/proc/self/stat");
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    const char *p = strrchr(buf, ')');   /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    long long rss = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %*u %*u %lld",
                     &ut, &st, &rss) != 3)
        return -1;
    *ticks = ut + st;
    *rss_pages = rss;
    return 0;
}

static double round1(double v) { return (double)(int64_t)(v * 10 + 0.5) / 10; }

int status_usage_json(const long *pids, const char *const *names, size_t n, int interval_ms, jbuf *out)
{
    enum { MAX_P = 64 };
    unsigned long long t0[MAX_P] = {0}, t1[MAX_P] = {0};
    long long rss[MAX_P] = {0}, range = 0, e0 = engine_rapl_uj(NULL), e1;
    int ok[MAX_P] = {0};
    if (n > MAX_P) n = MAX_P;
    int64_t w0 = bk_mono_us();
    for (size_t i = 0; i < n; i++) ok[i] = pid_stat(pids[i], &t0[i], &rss[i]) == 0;
    usleep((useconds_t)interval_ms * 1000);
    int64_t w1 = bk_mono_us();
    for (size_t i = 0; i < n; i++) ok[i] = ok[i] && pid_stat(pids[i], &t1[i], &rss[i]) == 0;
    e1 = engine_rapl_uj(&range);
    long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    double secs = (double)(w1 - w0) / 1e6, cpu_sum = 0;
    long long rss_sum = 0;
    char mi[8192] = "";
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        size_t k = fread(mi, 1, sizeof mi - 1, f);
        mi[k] = 0;
        fclose(f);
    }
    jbuf procs;
    jbuf_init(&procs);
    for (size_t i = 0; i < n; i++) {
        if (!ok[i]) continue;
        double cpu = hz > 0 && secs > 0 ? (double)(t1[i] - t0[i]) / (double)hz / secs * 100.0 : 0.0;
        long long rb = rss[i] * (long long)page;
        cpu_sum += cpu;
        rss_sum += rb;
        if (procs.len) jbuf_putc(&procs, ',');
        jbuf_puts(&procs, "{\"name\":");
        json_put_cstr(&procs, names[i]);
        jbuf_printf(&procs, ",\"pid\":%ld,\"rss_bytes\":%lld,\"cpu_percent\":", pids[i] ? pids[i] : (long)getpid(),
                    rb);
        json_put_double(&procs, round1(cpu));
        jbuf_putc(&procs, '}');
    }
    jbuf_printf(out, "{\"source\":\"proc\",\"cores\":%ld,\"mem_total_bytes\":%lld,\"mem_available_bytes\":%lld,"
                     "\"swap_total_bytes\":%lld,\"swap_free_bytes\":%lld,\"rss_bytes\":%lld,\"cpu_percent\":",
                sysconf(_SC_NPROCESSORS_ONLN), meminfo_kb(mi, "MemTotal:") * 1024,
                meminfo_kb(mi, "MemAvailable:") * 1024, meminfo_kb(mi, "SwapTotal:") * 1024,
                meminfo_kb(mi, "SwapFree:") * 1024, rss_sum);
    json_put_double(out, round1(cpu_sum));
    jbuf_printf(out, ",\"interval_ms\":%lld,\"processes\":[", (long long)((w1 - w0) / 1000));
    jbuf_put(out, procs.p ? procs.p : "", procs.len);
    jbuf_puts(out, "],\"package_watts\":");
    long long de = e0 < 0 || e1 < 0 ? -1 : e1 >= e0 ? e1 - e0 : range > 0 ? e1 + range - e0 : -1;
    if (de >= 0 && secs > 0) json_put_double(out, (double)de / 1e6 / secs);
    else jbuf_puts(out, "null");   /* unreadable, or wrapped without a known range */
    jbuf_puts(out, ",\"gpus\":[],\"gpu_limiter\":null}");
    int rc = procs.oom || out->oom ? -1 : 0;
    jbuf_free(&procs);
    return rc;
}

static struct {
    pthread_mutex_t mu;
    int64_t at_us;             /* when the cached answer was taken */
    char *json;
} usage = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* §2.3: sampled over 250 ms, the answer cached for up to 1 s so that a
 * polling UI does not keep a core busy measuring. */
static void h_bankml_usage(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    pthread_mutex_lock(&usage.mu);
    if (!usage.json || bk_mono_us() - usage.at_us > 1000000) {
        static const long self[1] = {0};
        static const char *const name[1] = {"bankml serve"};
        jbuf out;
        jbuf_init(&out);
        if (status_usage_json(self, name, 1, 250, &out) == 0) {
            free(usage.json);
            usage.json = strdup(out.p);
            usage.at_us = bk_mono_us();
        }
        jbuf_free(&out);
    }
    if (usage.json) serve_reply(resp, 200, "application/json; charset=utf-8", usage.json, strlen(usage.json));
    else llama_reply_err(resp, 500, "out of memory");
    pthread_mutex_unlock(&usage.mu);
}

static void put_html(jbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') jbuf_puts(b, "&lt;");
        else if (*s == '>') jbuf_puts(b, "&gt;");
        else if (*s == '&') jbuf_puts(b, "&amp;");
        else if (*s == '"') jbuf_puts(b, "&quot;");
        else jbuf_putc(b, *s);
    }
}

/* GET /: the chat page for a browser (it asks for text/html), a line for others. */
static void h_root(serve_req *req, serve_resp *resp, void *ud)
{
    const char *accept = serve_header_get(req, "Accept");
    if (!accept || !strstr(accept, "text/html") || ((status_api *)ud)->ui_off) {
        serve_reply_text(resp, 200, "bankml is running (Ollama's API at /api, native only)\n");
        return;
    }
    ui_page(resp);
}

/* GET /bankml/status: the status page for a browser, /bankml's JSON for others. */
static void h_status(serve_req *req, serve_resp *resp, void *ud)
{
    const char *accept = serve_header_get(req, "Accept");
    if (!accept || !strstr(accept, "text/html")) {
        bankml_json(resp, ud, 1);
        return;
    }
    jbuf out;
    jbuf_init(&out);
    jbuf_puts(&out, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"3\">"
                    "<title>bankml serve</title></head><body style=\"font-family:monospace\">\n<h1>bankml serve "
                    BANKML_VERSION "</h1>\n<p>");
    status_api *api = ud;
    engine_status_info st;
    engine_entry en;
    engine_metrics *met = malloc(sizeof *met);
    engine_status_get(api->e, &st);
    free(st.verified_json);
    jbuf_puts(&out, "resident: ");
    put_html(&out, st.resident >= 0 && engine_entry_get(api->e, (size_t)st.resident, &en) == 0 ? en.name : "none");
    jbuf_printf(&out, "; sha256 %s</p>\n<p>models:", st.last_sha[0] ? st.last_sha : "(none yet)");
    for (size_t i = 0; engine_entry_get(api->e, i, &en) == 0; i++) {
        jbuf_putc(&out, ' ');
        put_html(&out, en.name);
        if (!en.present) jbuf_puts(&out, " (absent)");
    }
    if (met) {
        engine_metrics_get(api->e, met, 0);
        jbuf_printf(&out, "</p>\n<p>completions: %llu prompt tokens, %llu generated; %s</p>\n",
                    (unsigned long long)met->tot_prompt, (unsigned long long)met->tot_completion,
                    met->processing ? "generating now" : "idle");
        free(met);
    }
    {
        jbuf lines;
        jbuf_init(&lines);
        bk_log_ring_text(&lines);
        jbuf_puts(&out, "<h2>log</h2>\n<pre>");
        put_html(&out, lines.p ? lines.p : "");
        jbuf_puts(&out, "</pre>\n");
        jbuf_free(&lines);
    }
    jbuf_puts(&out, "<p><a href=\"/\">chat</a> &middot; <a href=\"/bankml\">/bankml</a> &middot; <a href=\"/bankml/usage\">/bankml/usage</a> &middot; "
                    "<a href=\"/bankml/metrics\">/bankml/metrics</a> &middot; <a href=\"/metrics\">/metrics</a> "
                    "&middot; <a href=\"/v1/models\">/v1/models</a></p>\n</body></html>\n");
    serve_reply(resp, 200, "text/html; charset=utf-8", out.p, out.len);
    jbuf_free(&out);
}

/* Unknown routes: under /v1/ llama-server's own JSON 404 (OpenAI clients
 * parse it); elsewhere a text line that lists every route. */

status_api *status_register(serve_server *srv, engine *e, const char *upstream)
{
    status_api *api = calloc(1, sizeof *api);
    if (!api) return NULL;
    api->e = e;
    api->upstream = upstream ? upstream : "";
    serve_route(srv, "GET", "/bankml", h_bankml, api, 0);
    serve_route(srv, "GET", "/metrics", h_metrics, api, SERVE_ALWAYS);
    serve_route(srv, "GET", "/bankml/usage", h_bankml_usage, api, 0);
    serve_route(srv, "GET", "/bankml/metrics", h_bankml_metrics, api, 0);
    serve_route(srv, "GET", "/bankml/status", h_status, api, 0);
    serve_route(srv, "GET", "/", h_root, api, SERVE_PUBLIC);
    if (ui_register(srv)) {
        free(api);
        return NULL;
    }
    return api;
}

void status_free(status_api *api) { free(api); }

void status_set_metrics(status_api *api, int on) { api->metrics_off = !on; }

void status_set_ui(status_api *api, int on) { api->ui_off = !on; }
