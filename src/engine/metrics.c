/*
 * metrics.c -- the engine's counters (what /metrics and /bankml/metrics
 * print, under their own lock), its error records and log lines: the
 * bottom of the engine layer, called by engine.c and slot.c. See engine.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/internal.h"

void engine_err(engine_error *er, engine_kind k, const char *fmt, ...)
{
    va_list ap;
    if (!er) return;
    er->kind = k;
    va_start(ap, fmt);
    vsnprintf(er->msg, sizeof er->msg, fmt, ap);
    va_end(ap);
}

void engine_log(const engine *e, const char *fmt, ...)
{
    va_list ap;
    if (!e->o.log_name) return;
    fprintf(stderr, "%s: ", e->o.log_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ------------------------------------------------------------------ counters */

static void bucket_add(engine_bucket *b, uint64_t n, uint64_t steps, uint64_t us)
{
    b->count += n;
    b->steps += steps;
    b->us += us;
}

double engine_bucket_rate(const engine_bucket *b) { return b->us ? (double)b->steps / (double)b->us * 1e6 : 0.0; }

void engine_met_busy(engine *e, int delta_processing, int delta_deferred)
{
    pthread_mutex_lock(&e->met_mu);
    e->met.processing += delta_processing;
    e->met.deferred += delta_deferred;
    pthread_mutex_unlock(&e->met_mu);
}

/* One finished completion, as llama-server counts it: prompt tokens
 * evaluated (cached ones apart), its decode calls, and the generation rate
 * over decode steps (the first token comes free with the prompt). */
void engine_met_record(engine *e, const engine_model *m, const engine_result *g, uint64_t n_calls,
                       const char *finish)
{
    if (g->n_prompt == 0) return;
    int64_t tp = g->t_prompt_last ? g->t_prompt_last - g->t_start : -1;
    int64_t te = g->t_prompt_last && g->t_gen_last ? g->t_gen_last - g->t_prompt_last : -1;
    pthread_mutex_lock(&e->met_mu);
    engine_metrics *met = &e->met;
    if (tp >= 0) {
        bucket_add(&met->prompt, g->n_processed, g->n_processed, (uint64_t)tp);
        bucket_add(&met->prompt_win, g->n_processed, g->n_processed, (uint64_t)tp);
    }
    if (te >= 0 && g->n_decoded) {
        bucket_add(&met->predict, g->n_decoded, g->n_decoded - 1, (uint64_t)te);
        bucket_add(&met->predict_win, g->n_decoded, g->n_decoded - 1, (uint64_t)te);
    }
    met->cached += g->n_cached;
    met->n_decode += n_calls;
    met->n_busy += n_calls;
    if (m->slots[m->cur].n > met->n_tokens_max) met->n_tokens_max = m->slots[m->cur].n;
    met->tot_prompt += g->n_prompt;
    met->tot_completion += g->n_decoded;
    engine_record *r = &met->ring[e->met_head];
    memset(r, 0, sizeof *r);
    r->at = (int64_t)time(NULL);
    if (m->idx < e->n_reg) engine_model_name(e->reg[m->idx].file, r->model, sizeof r->model);
    r->prompt = g->n_prompt;
    r->cached = g->n_cached;
    r->completion = g->n_decoded;
    r->prompt_ms = tp >= 0 ? (double)tp / 1e3 : -1;
    r->eval_ms = te >= 0 ? (double)te / 1e3 : -1;
    r->ttft_ms = g->t_first_text ? (double)(g->t_first_text - g->t_start) / 1e3 : -1;
    r->finish = finish;
    e->met_head = (e->met_head + 1) % ENGINE_KEEP_RECORDS;
    if (met->n_rec < ENGINE_KEEP_RECORDS) met->n_rec++;
    pthread_mutex_unlock(&e->met_mu);
}

void engine_metrics_get(engine *e, engine_metrics *out, int reset_window)
{
    pthread_mutex_lock(&e->met_mu);
    *out = e->met;
    /* the ring oldest first */
    for (size_t k = 0; k < e->met.n_rec; k++)
        out->ring[k] = e->met.ring[(e->met_head + ENGINE_KEEP_RECORDS - e->met.n_rec + k) % ENGINE_KEEP_RECORDS];
    if (reset_window) {
        memset(&e->met.prompt_win, 0, sizeof e->met.prompt_win);
        memset(&e->met.predict_win, 0, sizeof e->met.predict_win);
    }
    pthread_mutex_unlock(&e->met_mu);
}
