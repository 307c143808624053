/*
 * log.c -- bankml's log lines: text on stderr or JSON lines on stdout, the
 * --log-file copy, the threshold, and the ring /bankml/status reads. See
 * log.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/log.h"
#include "base/progress.h"

static struct {
    pthread_mutex_t mu;
    bk_log_opts o;
    int set;                   /* o was given (else the defaults) */
    FILE *file;
    int64_t t0_us;             /* the start, for --log-timestamps */
    char *ring_json[BK_LOG_RING], *ring_text[BK_LOG_RING];
    size_t head, n;
} lg = {.mu = PTHREAD_MUTEX_INITIALIZER};

void bk_log_opts_init(bk_log_opts *o)
{
    memset(o, 0, sizeof *o);
    o->verbosity = BK_LOG_INFO;
}

int bk_log_setup(const bk_log_opts *o, char *err, size_t errlen)
{
    FILE *f = NULL;
    if (o->file && !(f = fopen(o->file, "w"))) {
        bk_err(err, errlen, "--log-file %s: cannot open it for writing: %s", o->file, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&lg.mu);
    if (lg.file) fclose(lg.file);
    lg.file = f;
    lg.o = *o;
    lg.o.file = NULL;
    lg.set = 1;
    lg.t0_us = bk_mono_us();
    pthread_mutex_unlock(&lg.mu);
    return 0;
}

void bk_log_close(void)
{
    pthread_mutex_lock(&lg.mu);
    if (lg.file) fclose(lg.file);
    lg.file = NULL;
    pthread_mutex_unlock(&lg.mu);
}

static int log_threshold(void) { return lg.set ? lg.o.verbosity : BK_LOG_INFO; }

int bk_log_on(int level) { return level <= log_threshold(); }

static const char *log_level_name(int level)
{
    switch (level) {
    case BK_LOG_ERROR: return "error";
    case BK_LOG_WARN: return "warn";
    case BK_LOG_INFO: return "info";
    case BK_LOG_DEBUG: return "debug";
    }
    return "none";
}

/* A string member of the text form: bare when it has no space, quote or
 * control byte, else JSON-quoted. */
static void log_put_text_value(jbuf *b, const char *s)
{
    int bare = *s != 0;
    for (const char *p = s; *p && bare; p++)
        if ((unsigned char)*p <= ' ' || *p == '"' || *p == '=') bare = 0;
    if (bare) jbuf_puts(b, s);
    else json_put_cstr(b, s);
}

static void log_put_ms(jbuf *b, double ms)
{
    jbuf_printf(b, "%.1f", ms);
}

/* Both forms of one line, then the ring and the writes. */
static void log_emit(int level, const char *type, const char *msg, const bk_log_kv *kv, size_t n)
{
    jbuf t, j;
    const bk_log_kv *reason = NULL;
    jbuf_init(&t);
    jbuf_init(&j);
    pthread_mutex_lock(&lg.mu);
    int64_t rel = bk_mono_us() - lg.t0_us;
    int64_t time_us = lg.set && lg.o.timestamps ? rel : 0;   /* llama-server's "time": 0 without timestamps */
    jbuf_puts(&t, msg);
    jbuf_puts(&j, "{\"type\":");
    json_put_cstr(&j, type);
    jbuf_printf(&j, ",\"time\":%lld,\"level\":\"%s\",\"msg\":", (long long)time_us, log_level_name(level));
    json_put_cstr(&j, msg);
    jbuf_printf(&j, ",\"unix_ms\":%lld", (long long)(bk_wall_ns() / 1000000));
    for (size_t i = 0; i < n; i++) {
        jbuf_putc(&j, ',');
        json_put_cstr(&j, kv[i].key);
        jbuf_putc(&j, ':');
        if (kv[i].s) json_put_cstr(&j, kv[i].s);
        else if (kv[i].is_ms) log_put_ms(&j, kv[i].d);
        else jbuf_printf(&j, "%lld", (long long)kv[i].i);
        if (!strcmp(kv[i].key, "reason") && kv[i].s) {
            reason = &kv[i];
            continue;
        }
        if (kv[i].json_only) continue;
        jbuf_printf(&t, " %s=", kv[i].key);
        if (kv[i].s) log_put_text_value(&t, kv[i].s);
        else if (kv[i].is_ms) log_put_ms(&t, kv[i].d);
        else jbuf_printf(&t, "%lld", (long long)kv[i].i);
    }
    if (reason) {
        jbuf_puts(&t, " refused: ");
        jbuf_puts(&t, reason->s);
    }
    jbuf_putc(&j, '}');
    if (!t.oom && !j.oom) {
        size_t k = lg.head;
        free(lg.ring_json[k]);
        free(lg.ring_text[k]);
        lg.ring_json[k] = strdup(j.p);
        lg.ring_text[k] = strdup(t.p);
        lg.head = (lg.head + 1) % BK_LOG_RING;
        if (lg.n < BK_LOG_RING) lg.n++;
    }
    if (!t.oom && !j.oom && level <= log_threshold() && !(lg.set && lg.o.disabled)) {
        int json = lg.set && lg.o.json;
        char pre[48] = "";
        const char *col = "", *end = "";
        if (lg.set && lg.o.prefix && level != BK_LOG_GENERIC) {
            size_t k = 0;
            if (lg.o.timestamps)
                k = (size_t)snprintf(pre, sizeof pre, "%d.%02d.%03d.%03d ", (int)(rel / 60000000),
                                     (int)(rel / 1000000 % 60), (int)(rel / 1000 % 1000), (int)(rel % 1000));
            snprintf(pre + k, sizeof pre - k, "%c ", "GEWID"[level]);
        }
        if (lg.set && lg.o.colors && level != BK_LOG_INFO && level != BK_LOG_GENERIC) {
            col = level == BK_LOG_ERROR ? "\033[31m" : level == BK_LOG_WARN ? "\033[35m" : "\033[33m";
            end = "\033[0m";
        }
        if (!json) bk_progress_interrupt();   /* a progress line on the terminal is erased first */
        if (json) {
            fprintf(stdout, "%s\n", j.p);
            fflush(stdout);
        } else {
            fprintf(stderr, "%s%s%s%s\n", col, pre, t.p, end);
        }
        if (lg.file) {
            fprintf(lg.file, "%s%s\n", json ? "" : pre, json ? j.p : t.p);
            fflush(lg.file);
        }
    }
    pthread_mutex_unlock(&lg.mu);
    jbuf_free(&t);
    jbuf_free(&j);
}

void bk_log(int level, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_emit(level, "log", buf, NULL, 0);
}

void bk_log_event(int level, const char *type, const char *msg, const bk_log_kv *kv, size_t n)
{
    log_emit(level, type, msg, kv, n);
}

void bk_log_ring_json(jbuf *out)
{
    pthread_mutex_lock(&lg.mu);
    jbuf_putc(out, '[');
    for (size_t k = 0; k < lg.n; k++) {
        const char *s = lg.ring_json[(lg.head + BK_LOG_RING - lg.n + k) % BK_LOG_RING];
        if (k) jbuf_putc(out, ',');
        jbuf_puts(out, s ? s : "null");
    }
    jbuf_putc(out, ']');
    pthread_mutex_unlock(&lg.mu);
}

void bk_log_ring_text(jbuf *out)
{
    pthread_mutex_lock(&lg.mu);
    for (size_t k = 0; k < lg.n; k++) {
        const char *s = lg.ring_text[(lg.head + BK_LOG_RING - lg.n + k) % BK_LOG_RING];
        jbuf_puts(out, s ? s : "");
        jbuf_putc(out, '\n');
    }
    pthread_mutex_unlock(&lg.mu);
}
