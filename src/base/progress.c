/*
 * progress.c -- the terminal's progress line. See progress.h.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/progress.h"

static struct {
    pthread_mutex_t mu;
    int on;
    int active;                /* the running piece's handle, 0 none */
    int next;
    int drawn;                 /* a line is on the terminal now */
    char label[160], unit[16];
    uint64_t total, done;
    int64_t t0_us, last_us;
} pg = {.mu = PTHREAD_MUTEX_INITIALIZER, .next = 1};

void bk_progress_enable(int on)
{
    const char *env = getenv("BANKML_PROGRESS");
    pthread_mutex_lock(&pg.mu);
    if (env && !strcmp(env, "0")) pg.on = 0;
    else if (env && !strcmp(env, "1")) pg.on = on;
    else pg.on = on && isatty(2);
    pthread_mutex_unlock(&pg.mu);
}

/* An amount in the unit: bytes as KiB/MiB/GiB, others as they are. */
static void progress_amount(char *out, size_t n, double v, const char *unit)
{
    if (strcmp(unit, "B")) {
        snprintf(out, n, "%.0f %s", v, unit);
        return;
    }
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t k = 0;
    while (v >= 1024.0 && k + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        k++;
    }
    snprintf(out, n, k ? "%.1f %s" : "%.0f %s", v, units[k]);
}

void bk_progress_format(char *out, size_t n, const char *label, uint64_t done, uint64_t total, const char *unit,
                        double secs)
{
    char a[32], b[32], r[40];
    progress_amount(a, sizeof a, (double)done, unit);
    if (!total) {
        snprintf(out, n, "%s  %.1f s", label, secs);
        return;
    }
    progress_amount(b, sizeof b, (double)total, unit);
    double rate = secs > 0 ? (double)done / secs : 0;
    progress_amount(r, sizeof r, rate, unit);
    int pct = (int)((double)done * 100.0 / (double)total);
    if (rate > 0 && done < total)
        snprintf(out, n, "%s  %3d%% %s of %s, %s/s, %.1f s left", label, pct, a, b, r,
                 (double)(total - done) / rate);
    else
        snprintf(out, n, "%s  %3d%% %s of %s%s%s%s", label, pct, a, b, rate > 0 ? ", " : "", rate > 0 ? r : "",
                 rate > 0 ? "/s" : "");
}

static void progress_draw(int64_t now)
{
    char line[400];
    bk_progress_format(line, sizeof line, pg.label, pg.done, pg.total, pg.unit, (double)(now - pg.t0_us) / 1e6);
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    pg.drawn = 1;
    pg.last_us = now;
}

int bk_progress_begin(const char *label, uint64_t total, const char *unit)
{
    int h = 0;
    pthread_mutex_lock(&pg.mu);
    if (pg.on && !pg.active) {
        h = pg.active = pg.next++;
        snprintf(pg.label, sizeof pg.label, "%s", label);
        snprintf(pg.unit, sizeof pg.unit, "%s", unit ? unit : "B");
        pg.total = total;
        pg.done = 0;
        pg.t0_us = bk_mono_us();
        progress_draw(pg.t0_us);   /* the label at once: work of unknown length has no update */
    }
    pthread_mutex_unlock(&pg.mu);
    return h;
}

void bk_progress_update(int h, uint64_t done)
{
    if (!h) return;
    pthread_mutex_lock(&pg.mu);
    if (pg.active == h) {
        int64_t now = bk_mono_us();
        pg.done = done;
        if (now - pg.last_us >= 100000) progress_draw(now);   /* ten times a second at most */
    }
    pthread_mutex_unlock(&pg.mu);
}

void bk_progress_end(int h)
{
    if (!h) return;
    pthread_mutex_lock(&pg.mu);
    if (pg.active == h) {
        if (pg.drawn) fputs("\r\033[K", stderr);
        fflush(stderr);
        pg.drawn = 0;
        pg.active = 0;
    }
    pthread_mutex_unlock(&pg.mu);
}

void bk_progress_interrupt(void)
{
    pthread_mutex_lock(&pg.mu);
    if (pg.drawn) {
        fputs("\r\033[K", stderr);
        pg.drawn = 0;
        pg.last_us = 0;
    }
    pthread_mutex_unlock(&pg.mu);
}
