/*
 * metrics.c -- the engine's counters (what /metrics and /bankml/metrics
 * print, under their own lock), its error records and log lines: the
 * bottom of the engine layer, called by engine.c and slot.c. See engine.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
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
    char buf[1600];
    va_list ap;
    if (!e->o.log_name) return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bk_log(BK_LOG_INFO, "%s: %s", e->o.log_name, buf);
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
long long engine_rapl_uj(long long *range)
{
    const char *dir = getenv("BANKML_RAPL_DIR");
    char path[4096];
    long long v = -1, r = 0;
    if (!dir || !*dir) dir = "/sys/class/powercap/intel-rapl:0";
    snprintf(path, sizeof path, "%s/energy_uj", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%lld", &v) != 1 || v < 0) v = -1;
        fclose(f);
    }
    if (range) {
        snprintf(path, sizeof path, "%s/max_energy_range_uj", dir);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%lld", &r) != 1 || r < 0) r = 0;
            fclose(f);
        }
        *range = r;
    }
    return v;
}

void engine_met_record(engine *e, const engine_model *m, const engine_result *g, uint64_t n_calls,
                       const char *finish, long long uj0)
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
    long long range = 0, uj1 = uj0 >= 0 ? engine_rapl_uj(&range) : -1;
    r->energy_j = -1;
    if (uj1 >= 0) {   /* a counter that went round once: its range added back */
        long long d = uj1 >= uj0 ? uj1 - uj0 : range > 0 ? uj1 + range - uj0 : -1;
        if (d >= 0) {
            r->energy_j = (double)d / 1e6;
            met->tot_energy_j += r->energy_j;
            met->tot_energy_tokens += g->n_decoded;
        }
    }
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

/* ------------------------------------------------------------------ task ids and GET /slots' views */

int64_t engine_task_ids(engine *e, int n)
{
    pthread_mutex_lock(&e->met_mu);
    int64_t id = e->next_task;
    e->next_task += n;
    pthread_mutex_unlock(&e->met_mu);
    return id;
}

void engine_view_open(engine *e, const engine_model *m)
{
    pthread_mutex_lock(&e->met_mu);
    for (int i = e->n_views; i < m->n_slots; i++) {
        memset(&e->views[i], 0, sizeof e->views[i]);
        e->views[i].has_next_token = 1;   /* server_slot's initial value */
        e->views[i].n_remain = -1;
    }
    if (m->n_slots > e->n_views) e->n_views = m->n_slots;
    e->views_n_ctx = fw_n_ctx(m->slots[0].fw);
    for (int i = 0; i < m->n_slots; i++) e->views[i].n_tokens = m->slots[i].n;
    pthread_mutex_unlock(&e->met_mu);
}

void engine_view_tokens(engine *e, const engine_model *m)
{
    pthread_mutex_lock(&e->met_mu);
    for (int i = 0; i < e->n_views; i++) e->views[i].n_tokens = m && i < m->n_slots ? m->slots[i].n : 0;
    pthread_mutex_unlock(&e->met_mu);
}

void engine_view_begin(engine *e, int slot, const engine_request *rq, int64_t id_task)
{
    char *p = malloc(rq->task_params ? rq->task_params_len + 1 : 3);
    if (p && rq->task_params) {
        memcpy(p, rq->task_params, rq->task_params_len);
        p[rq->task_params_len] = 0;
    } else if (p) {
        memcpy(p, "{}", 3);
    }
    pthread_mutex_lock(&e->met_mu);
    if (slot >= 0 && slot < e->n_views) {
        engine_slot_info *v = &e->views[slot];
        free(v->params);
        v->params = p;
        p = NULL;
        v->has_task = 1;
        v->processing = 1;
        v->id_task = id_task;
        v->n_processed = v->n_cached = v->n_decoded = 0;
        v->n_remain = rq->n_predict;   /* n_predict_max - 0 */
        v->has_new_line = 0;
    }
    pthread_mutex_unlock(&e->met_mu);
    free(p);
}

void engine_view_reuse(engine *e, int slot, size_t n_cached, size_t n_processed)
{
    pthread_mutex_lock(&e->met_mu);
    if (slot >= 0 && slot < e->n_views) {
        e->views[slot].n_cached = n_cached;
        e->views[slot].n_processed = n_processed;
    }
    pthread_mutex_unlock(&e->met_mu);
}

void engine_view_step(engine *e, int slot, size_t n_tokens, size_t n_decoded, int32_t n_predict, int new_line)
{
    pthread_mutex_lock(&e->met_mu);
    if (slot >= 0 && slot < e->n_views) {
        engine_slot_info *v = &e->views[slot];
        v->n_tokens = n_tokens;
        v->n_decoded = n_decoded;
        v->n_remain = n_predict == -1 ? -1 : (int32_t)((int64_t)n_predict - (int64_t)n_decoded);
        v->has_next_token = 1;
        if (new_line) v->has_new_line = 1;
    }
    pthread_mutex_unlock(&e->met_mu);
}

void engine_view_end(engine *e, int slot, size_t n_tokens, int has_next)
{
    pthread_mutex_lock(&e->met_mu);
    if (slot >= 0 && slot < e->n_views) {
        engine_slot_info *v = &e->views[slot];
        v->processing = 0;
        v->n_tokens = n_tokens;
        if (has_next >= 0) v->has_next_token = has_next;
        v->n_processed = v->n_cached = v->n_decoded = 0;   /* server_slot::reset: stats = {} */
        v->n_remain = -1;
        v->has_new_line = 0;
    }
    pthread_mutex_unlock(&e->met_mu);
}

void engine_view_free(engine *e)
{
    for (int i = 0; i < e->n_views; i++) {
        free(e->views[i].params);
        e->views[i].params = NULL;
    }
    e->n_views = 0;
}

int engine_slots_info(engine *e, engine_slot_info *out, int max, size_t *n_ctx)
{
    int n = 0;
    pthread_mutex_lock(&e->met_mu);
    for (; n < e->n_views && n < max; n++) {
        out[n] = e->views[n];
        out[n].params = e->views[n].params ? strdup(e->views[n].params) : NULL;
    }
    if (n_ctx) *n_ctx = e->views_n_ctx;
    pthread_mutex_unlock(&e->met_mu);
    return n;
}

void engine_slot_info_free(engine_slot_info *s, int n)
{
    for (int i = 0; i < n; i++) {
        free(s[i].params);
        s[i].params = NULL;
    }
}
