/*
 * slot.c -- the slot: one completion run by llama-server b11669's rules
 * (server-context.cpp), the host prompt cache (server_prompt_cache) and
 * DRY's view of the vocabulary. See engine.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/progress.h"
#include "base/base.h"
#include "engine/internal.h"
#include "sampling/budget.h"

/* ------------------------------------------------------------------ DRY's vocabulary view */


static const char *vocab_piece(void *ctx, int32_t id, size_t *len)
{
    engine_model *m = ctx;
    if (!m->pieces) {
        int32_t n = tok_n_tokens(m->vocab);
        jbuf all;
        size_t *offs = calloc((size_t)n + 1, sizeof *offs);
        char err[128];
        jbuf_init(&all);
        for (int32_t i = 0; offs && i < n; i++) {
            offs[i] = all.len;
            tok_detokenize(m->vocab, &i, 1, 0, 1, &all, err, sizeof err);
        }
        if (!offs || all.oom) {
            free(offs);
            jbuf_free(&all);
            *len = 0;
            return "";
        }
        offs[n] = all.len;
        /* pointers first, bytes after, in one block */
        char **ptrs = malloc((size_t)n * sizeof *ptrs + all.len + 1);
        size_t *lens = malloc((size_t)n * sizeof *lens);
        if (!ptrs || !lens) {
            free(ptrs);
            free(lens);
            free(offs);
            jbuf_free(&all);
            *len = 0;
            return "";
        }
        char *bytes = (char *)(ptrs + n);
        if (all.len) memcpy(bytes, all.p, all.len);
        bytes[all.len] = 0;
        for (int32_t i = 0; i < n; i++) {
            ptrs[i] = bytes + offs[i];
            lens[i] = offs[i + 1] - offs[i];
        }
        free(offs);
        jbuf_free(&all);
        m->pieces = ptrs;
        m->piece_lens = lens;
    }
    if (id < 0 || id >= tok_n_tokens(m->vocab)) {
        *len = 0;
        return "";
    }
    *len = m->piece_lens[id];
    return m->pieces[id];
}

static int vocab_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n)
{
    engine_model *m = ctx;
    char err[128];
    return tok_tokenize(m->vocab, text, len, 0, 0, ids, n, err, sizeof err);
}

void engine_vocab_free(engine_model *m)
{
    gr_vocab_free(m->gvocab);
    m->gvocab = NULL;
    free(m->pieces);            /* one block: the pointers, then the bytes */
    free(m->piece_lens);
    m->pieces = NULL;
    m->piece_lens = NULL;
}

/* The grammar's pieces: llama_vocab::token_to_piece(id), the cache built
 * with special = true (control tokens show their text). */
typedef struct {
    engine_model *m;
    jbuf buf;
} gpiece_ctx;

static const char *gvocab_piece(void *ctx, int32_t id, size_t *len)
{
    gpiece_ctx *g = ctx;
    jbuf_reset(&g->buf);
    tok_piece(g->m->vocab, id, 1, &g->buf);
    *len = g->buf.oom ? 0 : g->buf.len;
    return g->buf.p ? g->buf.p : "";
}

static int gvocab_eog(void *ctx, int32_t id)
{
    gpiece_ctx *g = ctx;
    return tok_is_eog(g->m->vocab, id);
}

int engine_grammar_vocab(engine_model *m, engine_error *er)
{
    gpiece_ctx g = {m, {0}};
    jbuf_init(&g.buf);
    m->gvocab = gr_vocab_new(tok_n_tokens(m->vocab), gvocab_piece, gvocab_eog, &g, er->msg, sizeof er->msg);
    jbuf_free(&g.buf);
    if (!m->gvocab) {
        er->kind = ENGINE_INTERNAL;
        return -1;
    }
    return 0;
}

static int grammar_allows(void *ctx, int32_t id) { return gr_allows(ctx, id); }
static int grammar_apply(void *ctx, smp_token *c, size_t n) { return gr_apply(ctx, c, n); }

/* ------------------------------------------------------------------ requests and results */

void engine_request_init(engine_request *rq)
{
    memset(rq, 0, sizeof *rq);
    sampler_params_init(&rq->sp);
    rq->n_predict = -1;
    rq->cache_prompt = 1;
    rq->id_slot = -1;
    rq->id_task = -1;
    rq->rb_tokens = -1;
}

void engine_request_free(engine_request *rq)
{
    sampler_params_free(&rq->sp);
    free(rq->bias);
    rq->bias = NULL;
    rq->n_bias = 0;
    gr_free(rq->grammar);
    rq->grammar = NULL;
    free(rq->grammar_text);
    rq->grammar_text = NULL;
    rq->grammar_len = 0;
    engine_request_free_lazy(rq);
}

void engine_request_free_lazy(engine_request *rq)
{
    gr_lazy_free(rq->lazy);
    rq->lazy = NULL;
    for (size_t i = 0; i < rq->n_triggers; i++) free((char *)rq->triggers[i].value);
    free(rq->triggers);
    rq->triggers = NULL;
    rq->n_triggers = 0;
    free(rq->preserved);
    rq->preserved = NULL;
    rq->n_preserved = 0;
    free(rq->rb_start);
    rq->rb_start = NULL;
    rq->n_rb_start = 0;
    for (size_t i = 0; i < rq->n_rb_ends; i++) free(rq->rb_ends[i]);
    free(rq->rb_ends);
    free(rq->rb_end_lens);
    rq->rb_ends = NULL;
    rq->rb_end_lens = NULL;
    rq->n_rb_ends = 0;
    free(rq->rb_forced);
    rq->rb_forced = NULL;
    rq->n_rb_forced = 0;
    free(rq->prefill);
    rq->prefill = NULL;
    rq->n_prefill = 0;
    rq->grammar_prefill = 0;
}

void engine_result_free(engine_result *r)
{
    jbuf_free(&r->text);
    for (size_t i = 0; i < r->n_probs_out; i++) {
        free(r->probs[i].text);
        free(r->probs[i].top);
    }
    free(r->probs);
    r->probs = NULL;
    r->n_probs_out = 0;
    free(r->gen_ids);
    r->gen_ids = NULL;
    r->n_gen_ids = 0;
}

const char *engine_finish(const engine_result *r)
{
    return r->stop == ENGINE_STOP_EOS || r->stop == ENGINE_STOP_WORD ? "stop" : "length";
}

/* ------------------------------------------------------------------ one completion */

static int slot_push(engine_slot *sl, const int32_t *ids, size_t n)
{
    if (sl->n + n > sl->cap) {
        size_t cap = sl->cap ? sl->cap : 256;
        while (cap < sl->n + n) cap *= 2;
        int32_t *p = realloc(sl->toks, cap * sizeof *p);
        if (!p) return -1;
        sl->toks = p;
        sl->cap = cap;
    }
    memcpy(sl->toks + sl->n, ids, n * sizeof *ids);
    sl->n += n;
    return 0;
}

void engine_slot_ckpt_clear(engine_slot *sl)
{
    for (size_t i = 0; i < sl->n_ckpt; i++) fw_swa_ckpt_free(sl->ckpt[i].data);
    free(sl->ckpt);
    sl->ckpt = NULL;
    sl->n_ckpt = sl->cap_ckpt = 0;
}

void engine_slot_clear(engine_slot *sl)
{
    fw_truncate(sl->fw, 0);
    sl->n = 0;
    engine_slot_ckpt_clear(sl);
}

/* The working state of one completion. */
typedef struct {
    engine_model *m;
    engine_slot *sl;           /* the slot it runs in */
    const engine_request *rq;
    const engine_sink *sink;
    engine_result *res;
    engine_stopper st;
    sampler *s;
    gr_state *gs;              /* the grammar's stacks for this answer, NULL without one */
    rb_state *rb;              /* the reasoning budget, NULL without one */
    float *masked;             /* the logits with all but the budget's forced token at -inf */
    jbuf piece2;               /* the budget's UTF-8 check: a piece without specials */
    smp_token *work;
    sampler_prob *top;
    jbuf piece;
    uint64_t n_calls;
    int64_t id_task;           /* the task's id (a checkpoint records it) */
    size_t *ustart;            /* a chat's user message starts (token positions, ascending), malloc'd */
    size_t n_ustart;
} run_state;

static int is_ustart(const run_state *r, size_t pos)
{
    for (size_t k = 0; k < r->n_ustart; k++)
        if (r->ustart[k] == pos) return 1;
    return 0;
}

static long last_ustart(const run_state *r) { return r->n_ustart ? (long)r->ustart[r->n_ustart - 1] : -1; }

/* find_message_spans with the autoparser's delimiters (common_chat_msg_delimiters::split: at each token,
 * the first delimiter whose tokens start there, assistant's before user's): the user starts into r. 0, or
 * -1 when the template has no such analysis (a specialised one, or the analysis failed). */
static int chat_spans(run_state *r, engine_error *er)
{
    engine_model *m = r->m;
    pthread_mutex_lock(&m->chat_mu);   /* the chat layer analysed the template for this request */
    const chat_analysis *a = m->chat_state > 0 && m->chat_spec == CA_SPEC_NONE ? &m->chat : NULL;
    pthread_mutex_unlock(&m->chat_mu);
    if (!a) return -1;
    int32_t *dt[2] = {NULL, NULL};
    size_t dn[2] = {0, 0};
    const ca_str *ds[2] = {&a->assistant_start, &a->user_start};
    int rc = 0;
    for (int d = 0; d < 2 && rc == 0; d++)
        if (ds[d]->n && tok_tokenize(m->vocab, ds[d]->p, ds[d]->n, 0, 1, &dt[d], &dn[d], er->msg,
                                     sizeof er->msg) != 0)
            rc = -1;
    const int32_t *t = r->rq->prompt;
    const size_t n = r->rq->n_prompt;
    if (rc == 0 && !(r->ustart = malloc((n ? n : 1) * sizeof *r->ustart))) rc = -1;
    for (size_t i = 0; rc == 0 && i < n; i++)
        for (int d = 0; d < 2; d++) {
            if (!ds[d]->n || i + dn[d] > n || memcmp(t + i, dt[d], dn[d] * sizeof *t) != 0) continue;
            if (d == 1) r->ustart[r->n_ustart++] = i;
            break;
        }
    free(dt[0]);
    free(dt[1]);
    return rc;
}

/* One decode call: counted for /metrics, and the task id b11669's loop
 * takes for it (a NEXT_RESPONSE task each time a slot is still working). */
static void count_call(run_state *r)
{
    r->n_calls++;
    engine_task_ids(r->m->e, 1);
}

static int cancelled(run_state *r)
{
    if (r->sink && r->sink->cancelled && r->sink->cancelled(r->sink->ud)) {
        r->res->gone = 1;
        return 1;
    }
    return 0;
}

/* The model's file moved under the request (issue #22.5): written in place
 * (its ctime moved), shrunk (a read past its end was caught: what the map
 * now holds is zeros), or grown. Checked after every decode call, before
 * its logits are used, with fstat of the descriptor the map holds: the
 * request ends with the words a load of the changed file gets. 1 then. */
static int file_moved(run_state *r, engine_error *er)
{
    engine_model *m = r->m;
    if (gguf_map_intact(&m->map)) return 0;
    const char *file = m->idx < m->e->n_reg ? m->e->reg[m->idx].file : "the model file";
    engine_err(er, ENGINE_UNAVAILABLE, "%s changed since bankml verified it: unloaded, and refused; the next "
               "request verifies it again", file);
    engine_log(m->e, "%s changed during a request: the request ends with an error", file);
    return 1;
}

/* The sink's progress event with processed tokens in the slot: 0, 1 when
 * the sink asked to stop (gone set). */
static int slot_progress(run_state *r, size_t processed)
{
    if (!r->sink || !r->sink->on_progress) return 0;
    engine_progress p = {r->rq->n_prompt, r->res->n_cached, processed, (bk_mono_us() - r->res->t_start) / 1000};
    if (r->sink->on_progress(r->sink->ud, &p, r->res) == 0) return 0;
    r->res->gone = 1;
    return 1;
}

/* The prompt after the reused prefix, as llama-server's update_slots feeds
 * it: one decode call per n_batch tokens from the first one not reused
 * (fw_eval cuts each into micro-batches of n_ubatch, as llama_decode
 * does). n_processed and t_prompt_last advance after each call, as
 * b11669's n_prompt_processed and set_prompt_last do, and the sink's
 * on_progress is called before the first call and after each. 0, 1 when
 * the client left (the slot keeps what was computed), -1 when the model
 * failed. */
static int prefill_calls(run_state *r, size_t n_past, int pg, engine_error *er);

/* A window model without --swa-full (fw_swa_state answers): a chat's
 * prompt is refused before anything is evaluated (b11669 also cuts it at
 * each user message's start, by the template's message delimiters), and so
 * is any request with cache_prompt on a slot where one was refused (what
 * llama-server's slot holds then is unknown) until one without it. 0, or -1
 * with er set. */
static int swa_check(run_state *r, size_t n_past, engine_error *er)
{
    const engine_request *rq = r->rq;
    int32_t pmin, pmax;
    if (!fw_swa_state(r->sl->fw, &pmin, &pmax)) return 0;
    const unsigned n_swa = fw_weights_hp(r->m->fw_w)->n_swa;
    if (r->sl->swa_diverged && rq->cache_prompt && n_past > 0) {
        engine_err(er, ENGINE_BAD_INPUT, "a sliding-window model (window of %u) without --swa-full: an earlier "
                   "request on this slot was refused, so what llama-server's slot would hold is unknown; send "
                   "\"cache_prompt\": false once to start it afresh", n_swa);
        return -1;
    }
    r->sl->swa_diverged = 1;   /* until this request passes the check below */
    if (!rq->plain_prompt && !(rq->chat_delims && chat_spans(r, er) == 0)) {
        engine_err(er, ENGINE_BAD_INPUT, "a sliding-window model (window of %u) without --swa-full: llama-server "
                   "cuts this prompt at its messages for context checkpoints by delimiters bankml does not "
                   "reproduce here (a specialised chat template, Anthropic's or Ollama's routes, bankml generate); "
                   "use /v1/chat/completions or /completion, or start both servers with --swa-full", n_swa);
        return -1;
    }
    r->sl->swa_diverged = 0;
    return 0;
}

static void ckpt_erase(engine_slot *sl, size_t i)
{
    fw_swa_ckpt_free(sl->ckpt[i].data);
    memmove(sl->ckpt + i, sl->ckpt + i + 1, (sl->n_ckpt - i - 1) * sizeof *sl->ckpt);
    sl->n_ckpt--;
}

/* update_slots' prefix with a window cache (swa): the kept prefix n_past
 * (the common prefix, cache_prompt on) as b11669 settles it. When the
 * window cache's lowest position is at or above pos_next - n_swa (- 1 when
 * nothing is new), the newest checkpoint with pos_max <= pos_next and a
 * pos_min below that (or 0) is restored and n_past cut to it, else n_past
 * is 0 (the whole prompt again); the checkpoints past pos_next go. 0, or -1
 * when a restore failed. */
static int swa_prefix(run_state *r, size_t *n_past_io)
{
    engine_slot *sl = r->sl;
    int32_t pmin, pmax;
    size_t n_past = *n_past_io;
    const long n_swa = (long)fw_weights_hp(r->m->fw_w)->n_swa;
    long pos_next = (long)n_past;
    const int has_new = n_past < r->rq->n_prompt;
    long thold = pos_next - n_swa - (has_new ? 0 : 1);
    if (thold < 0) thold = 0;
    if (n_past > 0 && n_past <= sl->n && fw_swa_state(sl->fw, &pmin, &pmax) && (long)pmin >= thold) {
        size_t k = sl->n_ckpt;
        while (k > 0) {
            const engine_ckpt *c = &sl->ckpt[k - 1];
            if (c->pos_max <= pos_next && (c->pos_min < thold || c->pos_min == 0)) break;
            k--;
        }
        if (k > 0) {
            const engine_ckpt *c = &sl->ckpt[k - 1];
            if (fw_swa_load(sl->fw, c->data) != 0) return -1;
            const long top = c->pos_min + 1 > c->pos_max ? c->pos_min + 1 : c->pos_max;
            if (top < pos_next) pos_next = top;
            n_past = (size_t)pos_next < (size_t)c->n_tokens ? (size_t)pos_next : (size_t)c->n_tokens;
            engine_log(r->m->e, "restored context checkpoint (pos_min = %d, pos_max = %d, n_tokens = %lld, "
                       "n_past = %zu)", (int)c->pos_min, (int)c->pos_max, (long long)c->n_tokens, n_past);
        } else {
            pos_next = 0;
            n_past = 0;
        }
    }
    for (size_t i = 0; i < sl->n_ckpt;) {
        if (sl->ckpt[i].pos_max > pos_next) ckpt_erase(sl, i);
        else i++;
    }
    if (n_past == r->rq->n_prompt && n_past > 0) n_past--;   /* [TAG_PROMPT_LOGITS] */
    *n_past_io = n_past;
    return 0;
}

/* create_checkpoint before the decode call of the tokens [i, i + n) (the
 * window cache's positions as they are before it). */
static int ckpt_take(run_state *r, size_t i, int32_t pmin, int32_t pmax)
{
    engine_slot *sl = r->sl;
    const engine_opts *o = &r->m->e->o;
    const size_t max = o->ctx_checkpoints > 0 ? (size_t)o->ctx_checkpoints : 32;
    const int64_t step = o->checkpoint_min_step > 0 ? o->checkpoint_min_step : o->checkpoint_min_step < 0 ? 0 : 8192;
    int64_t last = -1;
    for (size_t k = 0; sl->n_ckpt + 1 >= max && k < sl->n_ckpt;) {
        if (sl->ckpt[k].id_task != r->id_task && last >= 0 && sl->ckpt[k].n_tokens <= last + step) {
            ckpt_erase(sl, k);
            continue;
        }
        last = sl->ckpt[k].n_tokens;
        k++;
    }
    while (sl->n_ckpt >= max) ckpt_erase(sl, 0);
    for (size_t k = 0; k < sl->n_ckpt;) {
        if (sl->ckpt[k].n_tokens == (int64_t)i) ckpt_erase(sl, k);
        else k++;
    }
    if (sl->n_ckpt == sl->cap_ckpt) {
        size_t cap = sl->cap_ckpt ? sl->cap_ckpt * 2 : 4;
        engine_ckpt *p = realloc(sl->ckpt, cap * sizeof *p);
        if (!p) return -1;
        sl->ckpt = p;
        sl->cap_ckpt = cap;
    }
    fw_swa_ckpt *d = fw_swa_save(sl->fw);
    if (!d) return -1;
    sl->ckpt[sl->n_ckpt++] = (engine_ckpt){(int64_t)i, pmin, pmax, r->id_task, d};
    return 0;
}

/* The tokens of the decode call from i of an n-token prompt: up to nb, and
 * with the window cache's checkpoints (swa) cut so the last min(nb, 4 +
 * n_ubatch) and the last min(nb, 4) tokens start calls of their own
 * (b11669's checkpoint_offsets). */
static size_t call_tokens(const run_state *r, size_t i, size_t n, size_t nb, size_t nub, int swa, int64_t step)
{
    size_t k = n - i < nb ? n - i : nb;
    if (!swa) return k;
    const size_t offs[2] = { 4 + nub < nb ? 4 + nub : nb, 4 < nb ? 4 : nb };
    const engine_slot *sl = r->sl;
    for (size_t j = 1; j < k; j++) {
        const size_t at = i + j;
        /* a chat: at the last user message, or at one when no checkpoint is kept or min-step past the last */
        if (is_ustart(r, at) && ((long)at == last_ustart(r) || sl->n_ckpt == 0 ||
                                 (int64_t)at > sl->ckpt[sl->n_ckpt - 1].n_tokens + step))
            return j;
        if (n - at == offs[0] || n - at == offs[1]) return j;
    }
    return k;
}

static int prefill(run_state *r, engine_error *er)
{
    engine_slot *sl = r->sl;
    const engine_request *rq = r->rq;
    const size_t nb = r->m->e->n_batch;
    int32_t pmin, pmax;
    size_t n_past;
    if (fw_swa_state(sl->fw, &pmin, &pmax)) {   /* the window cache: checkpoints decide what is kept */
        n_past = 0;
        if (rq->cache_prompt)
            while (n_past < sl->n && n_past < rq->n_prompt && sl->toks[n_past] == rq->prompt[n_past]) n_past++;
        if (swa_check(r, n_past, er)) return -1;
        if (swa_prefix(r, &n_past)) {
            engine_err(er, ENGINE_INTERNAL, "a context checkpoint could not be restored");
            return -1;
        }
    } else {
        n_past = engine_reuse(sl->toks, sl->n, rq->prompt, rq->n_prompt, rq->cache_prompt);
    }
    fw_truncate(sl->fw, n_past);
    sl->n = n_past;
    r->res->n_cached = n_past;
    r->res->n_processed = 0;   /* advances per decode call (b11669's n_prompt_tokens_processed) */
    engine_view_reuse(r->m->e, r->res->id_slot, n_past, rq->n_prompt - n_past);
    if (slot_progress(r, n_past)) return 1;
    /* a terminal's progress line for a prompt of several decode calls */
    int pg = rq->n_prompt - n_past > nb ? bk_progress_begin("prompt", rq->n_prompt - n_past, "tokens") : 0;
    int rc = prefill_calls(r, n_past, pg, er);
    bk_progress_end(pg);
    return rc;
}

/* prefill's decode calls from n_past (pg: its progress line, 0 none). */
static int prefill_calls(run_state *r, size_t n_past, int pg, engine_error *er)
{
    engine_slot *sl = r->sl;
    const engine_request *rq = r->rq;
    const size_t nb = r->m->e->n_batch;
    int32_t pmin, pmax;
    const int swa = fw_swa_state(sl->fw, &pmin, &pmax) && !r->m->e->o.no_checkpoints;
    for (size_t i = n_past; i < rq->n_prompt;) {
        const engine_opts *o = &r->m->e->o;
        const int64_t step = o->checkpoint_min_step > 0 ? o->checkpoint_min_step
                             : o->checkpoint_min_step < 0 ? 0 : 8192;
        size_t n = call_tokens(r, i, rq->n_prompt, nb, r->m->e->n_ubatch, swa, step);
        /* b11669's do_checkpoint: with the prompt done after this call, near its end or the call starting a
           user message, something in the window cache, and the first checkpoint, the last user message, near
           the end or min-step past the last one */
        const int near_end = rq->n_prompt < i + n + r->m->e->n_ubatch;
        if (swa && (i + n == rq->n_prompt || near_end || is_ustart(r, i)) && fw_swa_state(sl->fw, &pmin, &pmax) &&
            pmin >= 0) {
            if ((sl->n_ckpt == 0 || (long)i == last_ustart(r) || near_end ||
                 (int64_t)i > sl->ckpt[sl->n_ckpt - 1].n_tokens + step) &&
                ckpt_take(r, i, pmin, pmax) != 0) {
                engine_err(er, ENGINE_INTERNAL, "out of memory for a context checkpoint");
                return -1;
            }
        }
        count_call(r);
        if (fw_eval(sl->fw, rq->prompt + i, n, NULL, 0, er->msg, sizeof er->msg) != 0 ||
            slot_push(sl, rq->prompt + i, n) != 0) {
            er->kind = ENGINE_INTERNAL;
            return -1;
        }
        if (file_moved(r, er)) return -1;
        engine_view_tokens(r->m->e, r->m);
        i += n;
        bk_progress_update(pg, i - n_past);
        r->res->n_processed = i - n_past;
        r->res->t_prompt_last = bk_mono_us();
        if (slot_progress(r, i)) {
            engine_log(r->m->e, "the client went away; stopped after %zu of %zu prompt tokens (kept in the slot)", i,
                       rq->n_prompt);
            return 1;
        }
        if (i < rq->n_prompt && cancelled(r)) {
            engine_log(r->m->e, "the client went away; stopped after %zu of %zu prompt tokens (kept in the slot)", i,
                       rq->n_prompt);
            return 1;
        }
    }
    return 0;
}

/* The token's text when complete (llama-server's partial result): to the
 * sink, and kept when probabilities are reported. 0, 1 when the sink asked
 * to stop, -1 out of memory. */
static int report(run_state *r, engine_token *t, size_t n_top, const char *send, size_t send_len)
{
    engine_result *res = r->res;
    if (send_len && !res->t_first_text) res->t_first_text = bk_mono_us();
    t->text = malloc(send_len + 1);
    if (!t->text) return -1;
    memcpy(t->text, send, send_len);
    t->text[send_len] = 0;
    t->text_len = send_len;
    if (n_top) {
        t->top = malloc(n_top * sizeof *t->top);
        if (!t->top) {
            free(t->text);
            return -1;
        }
        for (size_t i = 0; i < n_top; i++) t->top[i] = (engine_prob){r->top[i].id, r->top[i].p};
        t->n_top = n_top;
    }
    int cb = r->sink && r->sink->on_token ? r->sink->on_token(r->sink->ud, t, res->stop, res) : 0;
    if (r->rq->sp.n_probs > 0) {
        engine_token *np = realloc(res->probs, (res->n_probs_out + 1) * sizeof *np);
        if (!np) {
            free(t->text);
            free(t->top);
            return -1;
        }
        res->probs = np;
        res->probs[res->n_probs_out++] = *t;
    } else {
        free(t->text);
        free(t->top);
    }
    if (cb != 0) {
        res->gone = 1;
        engine_log(r->m->e, "the client went away; stopped after %zu generated tokens", res->n_decoded);
        return 1;
    }
    return 0;
}

/* llama-server's accept_special_token: a preserved token prints its text
 * even when it is a control token. */
static int is_preserved(const engine_request *rq, int32_t tok)
{
    size_t lo = 0, hi = rq->n_preserved;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rq->preserved[mid] == tok) return 1;
        if (rq->preserved[mid] < tok) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

/* grammar_should_apply: a grammar, and no budget, or a grammar that is not
 * lazy, or a budget idle or done. */
static int grammar_should_apply(const run_state *r)
{
    if (!r->gs) return 0;
    if (!r->rb || !r->rq->grammar_lazy) return 1;
    int s = rb_state_of(r->rb);
    return s == RB_IDLE || s == RB_DONE;
}

/* A token into the grammar, with llama-server's words for the exception
 * its slot loop catches. */
static int grammar_take(run_state *r, int32_t tok, engine_error *er)
{
    if (gr_accept(r->gs, tok, er->msg + 15, sizeof er->msg - 15) == 0) return 0;
    memcpy(er->msg, "got exception: ", 15);
    er->kind = ENGINE_INTERNAL;
    return -1;
}

/* common_sampler_accept for a generated token: the budget takes it; when
 * that ended the block while the grammar sat out, the end sequence is
 * replayed into the grammar (it may hold a trigger); then the grammar takes
 * the token if it applied before. */
static int budget_accept(run_state *r, int32_t tok, int accept_grammar, engine_error *er)
{
    if (r->rb) {
        rb_accept(r->rb, tok);
        if (r->gs && !accept_grammar && rb_state_of(r->rb) == RB_DONE) {
            size_t n = 0;
            const int32_t *end = rb_end_match(r->rb, &n);
            for (size_t i = 0; end && i < n; i++)
                if (grammar_take(r, end[i], er)) return -1;
        }
    }
    return r->gs && accept_grammar ? grammar_take(r, tok, er) : 0;
}

/* common_utf8_is_complete over the token's piece without specials. */
static int budget_utf8_complete(void *ctx, int32_t id)
{
    run_state *r = ctx;
    jbuf_reset(&r->piece2);
    tok_piece(r->m->vocab, id, 0, &r->piece2);
    return rb_utf8_complete(r->piece2.p ? r->piece2.p : "", r->piece2.len);
}

/* One step: sample from the last logits, report, decide the stop. 0 to go
 * on, 1 when the answer ended (or the client left), -1 on failure. */
static int decode_step(run_state *r, int32_t *out_tok, engine_error *er)
{
    engine_model *m = r->m;
    engine_result *res = r->res;
    const sampler_params *sp = &r->rq->sp;
    int32_t n_vocab = (int32_t)fw_weights_hp(m->fw_w)->n_vocab;
    const float *logits = fw_logits(r->sl->fw);
    const float *draw = logits;
    sampler_constraint gc = {r->gs, grammar_allows, grammar_apply};
    /* common_sampler_sample: the reasoning budget first (its forced token alone keeps its logit), then the
     * chain, the grammar only where grammar_should_apply says (a lazy grammar sits out the thinking block) */
    int32_t forced = r->rb ? rb_forced(r->rb) : -1;
    if (forced >= 0) {
        for (int32_t i = 0; i < n_vocab; i++) r->masked[i] = i == forced ? logits[i] : -INFINITY;
        draw = r->masked;
    }
    int use_grammar = grammar_should_apply(r);
    int32_t tok = r->s ? sampler_sample_constrained(r->s, draw, use_grammar ? &gc : NULL, NULL)
                       : fw_argmax(draw, (size_t)n_vocab);
    if (tok < 0) {
        if (tok == -2) engine_err(er, ENGINE_INTERNAL, "the grammar failed: %s", gr_error(r->gs));
        else engine_err(er, ENGINE_INTERNAL, "the sampler could not draw a token");
        return -1;
    }
    /* common_sampler_accept: the grammar first (generated tokens only), then the chain */
    if (budget_accept(r, tok, use_grammar, er) != 0) return -1;
    if (r->s && sampler_accept(r->s, tok) != 0) goto oom;
    if (r->rq->return_tokens) {   /* llama-server's process_token keeps each one, whatever follows */
        int32_t *g = realloc(res->gen_ids, (res->n_gen_ids + 1) * sizeof *g);
        if (!g) goto oom;
        res->gen_ids = g;
        g[res->n_gen_ids++] = tok;
    }
    int64_t t_now = bk_mono_us();
    res->n_decoded++;
    if (res->n_decoded == 1) res->t_prompt_last = t_now;
    res->t_gen_last = t_now;
    engine_token t = {tok, 1.0f, NULL, 0, NULL, 0, 0};
    size_t n_top = 0;
    if (sp->n_probs > 0 && sp->post_sampling_probs && r->s) {
        float cp = 0;   /* the chain's candidates, as llama-server's post_sampling_probs */
        n_top = sampler_post_probs(r->s, (size_t)sp->n_probs, tok, r->top, &cp);
        t.p = cp;
        t.post = 1;
    } else if (sp->n_probs > 0) {
        float cp = 0;
        n_top = sampler_token_probs(logits, n_vocab, (size_t)sp->n_probs, tok, r->work, r->top, &cp);
        t.p = cp;   /* found over the whole vocabulary, as llama-server does */
    }
    int is_eog = tok_is_eog(m->vocab, tok);
    jbuf_reset(&r->piece);
    tok_piece(m->vocab, tok, is_preserved(r->rq, tok), &r->piece);
    const char *send;
    size_t send_len;
    int complete = engine_stopper_push(&r->st, r->piece.p ? r->piece.p : "", r->piece.len, is_eog, &send, &send_len);
    if (r->st.stopped) res->stop = ENGINE_STOP_WORD;
    engine_view_step(m->e, res->id_slot, r->sl->n, res->n_decoded, r->rq->n_predict,
                     complete && send_len && memchr(send, '\n', send_len) != NULL);
    if (complete) {
        int rc = report(r, &t, n_top, send, send_len);
        if (rc < 0) goto oom;
        if (rc > 0) return 1;
    }
    if (res->stop == ENGINE_STOP_NONE) {
        if (r->sl->n + 1 >= fw_n_ctx(r->sl->fw)) {
            res->truncated = 1;
            res->stop = ENGINE_STOP_LIMIT;
        } else if (r->rq->n_predict != -1 && (int64_t)r->rq->n_predict - (int64_t)res->n_decoded <= 0) {
            res->stop = ENGINE_STOP_LIMIT;
        }
    }
    if (is_eog) res->stop = ENGINE_STOP_EOS;
    if (res->stop != ENGINE_STOP_NONE) return 1;
    if (cancelled(r)) {
        engine_log(r->m->e, "the client went away; stopped after %zu generated tokens", res->n_decoded);
        return 1;
    }
    *out_tok = tok;
    return 0;
oom:
    engine_err(er, ENGINE_INTERNAL, "out of memory");
    return -1;
}

/* Sets up the sampler and the probability buffers. 0, -1 when the sampler
 * refused (nothing is counted then, as in llama-server), -2 out of memory. */
static int run_begin(run_state *r, engine_error *er)
{
    const engine_request *rq = r->rq;
    int32_t n_vocab = (int32_t)fw_weights_hp(r->m->fw_w)->n_vocab;
    if (!rq->greedy) {
        sampler_vocab sv = {r->m, vocab_piece, vocab_tokenize};
        r->s = sampler_new(&rq->sp, n_vocab, &sv, rq->bias, rq->n_bias, er->msg, sizeof er->msg);
        if (!r->s) {
            er->kind = ENGINE_INTERNAL;
            return -1;
        }
    }
    if (rq->sp.n_probs > 0) {
        r->work = malloc((size_t)n_vocab * sizeof *r->work);
        r->top = malloc((size_t)rq->sp.n_probs * sizeof *r->top);
        if (!r->work || !r->top) goto oom;
    }
    for (size_t i = 0; r->s && i < rq->n_prompt; i++)
        if (sampler_accept(r->s, rq->prompt[i]) != 0) goto oom;
    if (rq->grammar) {
        if (!r->s) {
            engine_err(er, ENGINE_BAD_INPUT, "a grammar needs the sampler; bankml's plain argmax path has none");
            return -1;
        }
        if (!r->m->gvocab && engine_grammar_vocab(r->m, er) != 0) return -1;
        r->gs = gr_state_new_lazy(rq->grammar, r->m->gvocab, rq->lazy, er->msg, sizeof er->msg);
        if (!r->gs) {
            er->kind = ENGINE_INTERNAL;
            return -1;
        }
        /* common_sampler_init: an output-format or tool-call grammar that is not lazy takes the generation
         * prompt's tokens (the template placed them in the prompt, the grammar starts with them) */
        for (size_t i = 0; rq->grammar_prefill && !rq->grammar_lazy && i < rq->n_prefill; i++)
            if (grammar_take(r, rq->prefill[i], er)) return -1;
    }
    if (rq->n_rb_start && rq->n_rb_ends && (rq->grammar_lazy || rq->rb_tokens >= 0)) {
        r->rb = rb_new(rq->rb_start, rq->n_rb_start, (const int32_t *const *)rq->rb_ends, rq->rb_end_lens,
                       rq->n_rb_ends, rq->rb_forced, rq->n_rb_forced, rq->rb_tokens < 0 ? INT32_MAX : rq->rb_tokens,
                       budget_utf8_complete, r);
        r->masked = malloc((size_t)n_vocab * sizeof *r->masked);
        if (!r->rb || !r->masked) goto oom;
        for (size_t i = 0; i < rq->n_prefill; i++) rb_accept(r->rb, rq->prefill[i]);   /* and the budget too */
    }
    return 0;
oom:
    engine_err(er, ENGINE_INTERNAL, "out of memory");
    return -2;
}

int engine_complete(engine *e, engine_model *m, const engine_request *rq, const engine_sink *sink,
                    engine_result *res, engine_error *er)
{
    run_state r;
    int rc = -1;
    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    jbuf_init(&res->text);
    r.m = m;
    r.rq = rq;
    r.sink = sink;
    r.res = res;
    engine_stopper_init(&r.st, rq->stops, rq->stop_lens, rq->n_stops);
    jbuf_init(&r.piece);
    jbuf_init(&r.piece2);
    res->n_prompt = rq->n_prompt;
    res->t_start = bk_mono_us();
    long long uj0 = engine_rapl_uj(NULL);
    res->id_slot = m->cur;
    /* a front-end checks ids as llama-server does (its words, its task ids);
     * this is the engine's own guard: an id outside the vocabulary would
     * read outside the embedding matrix */
    int32_t n_vocab = (int32_t)fw_weights_hp(m->fw_w)->n_vocab;
    for (size_t i = 0; i < rq->n_prompt; i++)
        if (rq->prompt[i] < 0 || rq->prompt[i] >= n_vocab) {
            engine_err(er, ENGINE_BAD_INPUT, "prompt token %d is outside the vocabulary (ids 0 to %d)",
                       (int)rq->prompt[i], (int)n_vocab - 1);
            engine_stopper_free(&r.st);
            jbuf_free(&r.piece);
            return -1;
        }
    /* taken as the task is posted, also when its sampler refuses */
    int64_t id_task = rq->id_task >= 0 ? rq->id_task : engine_task_ids(e, 1);
    if (rq->n_prompt == 0) {
        /* b11669 launches the task on its slot, then the loop answers it empty
         * and releases the slot (one NEXT_RESPONSE), the cells left as they were */
        if (!rq->selected) engine_select(e, m, rq->prompt, 0, rq->id_slot);
        res->id_slot = m->cur;
        engine_view_begin(e, m->cur, rq, id_task);
        engine_task_ids(e, 1);
        engine_view_end(e, m->cur, m->slots[m->cur].n, -1);
        engine_stopper_free(&r.st);
        return 0;
    }
    engine_met_busy(e, 1, 0);
    int b = run_begin(&r, er);
    if (b == -1) {
        engine_met_busy(e, -1, 0);
        engine_stopper_free(&r.st);
        return -1;
    }
    if (b != 0) goto done;
    if (!rq->selected) engine_select(e, m, rq->prompt, rq->n_prompt, rq->id_slot);
    r.sl = &m->slots[m->cur];
    res->id_slot = m->cur;
    engine_view_begin(e, m->cur, rq, id_task);
    r.id_task = id_task;
    int p = prefill(&r, er);
    if (p < 0) goto fail_model;
    if (p == 0) {
        for (;;) {
            int32_t tok;
            int s = decode_step(&r, &tok, er);
            if (s < 0) goto done;
            if (s > 0) break;
            count_call(&r);
            if (fw_decode(r.sl->fw, tok, NULL, er->msg, sizeof er->msg) != 0 || slot_push(r.sl, &tok, 1) != 0) {
                er->kind = ENGINE_INTERNAL;
                goto fail_model;
            }
            if (file_moved(&r, er)) goto fail_model;
        }
    }
    rc = 0;
    goto done;
fail_model:
    engine_slot_clear(r.sl);
done:
    if (rc == 0 && r.sl->n != fw_n_past(r.sl->fw)) engine_slot_clear(r.sl);   /* never let the two disagree */
    if (r.sl) {
        /* has_next_token: a decided stop clears it; a cancel leaves it set (unchanged before any token) */
        int has_next = res->stop != ENGINE_STOP_NONE || rc != 0 ? 0 : res->n_decoded ? 1 : -1;
        engine_view_end(e, res->id_slot, r.sl->n, has_next);
        if (res->gone) engine_task_ids(e, rq->n_tasks > 1 ? rq->n_tasks : 1);   /* the reader's cancel tasks */
    }
    res->stop_word = r.st.stop_word;
    res->n_sent = r.st.n_sent;
    jbuf_free(&res->text);
    res->text = r.st.text;     /* the answer's bytes move to the result */
    engine_met_record(e, m, res, r.n_calls, rc != 0 ? "error" : res->gone ? "cancelled" : engine_finish(res), uj0);
    engine_met_busy(e, -1, 0);
    par_pause(e->pool);        /* the request is over: no spinning while idle */
    sampler_free(r.s);
    gr_state_free(r.gs);
    rb_free(r.rb);
    free(r.masked);
    jbuf_free(&r.piece2);
    free(r.work);
    free(r.top);
    free(r.ustart);
    jbuf_free(&r.piece);
    return rc;
}

/* ------------------------------------------------------------------ the host prompt cache */

/* llama-server's server_prompt_cache (--cache-ram, on by default): when a
 * request would make the slot drop most of what it holds, the slot's cells
 * are saved to host memory first, and a saved prompt that serves the new
 * request better than the slot does is put back. Interleaved conversations
 * therefore resume where llama-server resumes them, which decides both
 * cache_n and the kernels of the prefill that follows. */
typedef struct pc_entry {
    int32_t *toks;
    size_t n;
    size_t size;               /* llama-server's state size for these cells: the limits count it */
    void *kv;                  /* fw_kv_save's bytes */
    size_t kv_len;
} pc_entry;

static size_t pc_lcp(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* llama_state_seq_get_size of one sequence of n cells in the model's cache
 * (-ctk/-ctv: its rows' real bytes): the stream and cell counts, each cell's
 * position, seq count and seq id, then per layer a type and row size header
 * before the K rows and the V rows. */
static size_t pc_state_size(const engine_model *m, size_t n)
{
    const fw_hparams *hp = fw_weights_hp(m->fw_w);
    fw_kv_info ki;
    fw_kv_info_of(m->fw_w, &ki);
    return 4 + 4 + n * 12 + 8 + (size_t)hp->n_layer * (24 + n * (ki.k_row + ki.v_row));
}

static void pc_drop(engine_model *m, size_t i)
{
    free(m->pc[i].toks);
    free(m->pc[i].kv);
    memmove(m->pc + i, m->pc + i + 1, (m->n_pc - i - 1) * sizeof *m->pc);
    m->n_pc--;
}

void engine_pc_clear(engine_model *m)
{
    while (m->n_pc) pc_drop(m, m->n_pc - 1);
    free(m->pc);
    m->pc = NULL;
    m->cap_pc = 0;
}

static size_t pc_bytes(const engine_model *m)
{
    size_t t = 0;
    for (size_t i = 0; i < m->n_pc; i++) t += m->pc[i].size;
    return t;
}

static size_t pc_tokens(const engine_model *m)
{
    size_t t = 0;
    for (size_t i = 0; i < m->n_pc; i++) t += m->pc[i].n;
    return t;
}

/* server_prompt_cache::update: oldest out while over the byte limit, then
 * while over the token limit (the whole context, every slot's cells,
 * raised to what the byte limit holds at the cache's average bytes per
 * token). */
static void pc_update(engine_model *m)
{
    if (m->e->o.cache_limit > 0)
        while (m->n_pc && pc_bytes(m) > m->e->o.cache_limit) pc_drop(m, 0);
    size_t nt = pc_tokens(m);
    float per_tok = (float)pc_bytes(m) / (float)(nt ? nt : 1);
    if (per_tok < 1.0f) per_tok = 1.0f;
    size_t limit_tokens = fw_n_ctx(m->slots[0].fw) * (size_t)m->n_slots, cur = limit_tokens;
    if (m->e->o.cache_limit > 0) {
        size_t fit = (size_t)((float)m->e->o.cache_limit / per_tok);
        if (fit > cur) cur = fit;
    }
    if (limit_tokens > 0)
        while (m->n_pc && pc_tokens(m) > cur) pc_drop(m, 0);
}

/* server_prompt_cache::alloc plus the copy (a slot's prompt_save): the
 * slot's cells saved, unless the slot is empty, an entry already holds it
 * whole, or it alone exceeds the limit. Entries the slot holds whole go;
 * the oldest go until it fits. 1 when saved, else 0. */
static int pc_save(engine_model *m, const engine_slot *sl)
{
    if (sl->n == 0) return 0;
    for (size_t i = 0; i < m->n_pc; i++)
        if (pc_lcp(m->pc[i].toks, m->pc[i].n, sl->toks, sl->n) == sl->n) return 0;
    size_t size = pc_state_size(m, sl->n);
    if (m->e->o.cache_limit > 0 && size > m->e->o.cache_limit) {
        engine_log(m->e, "a %zu-token prompt state (%zu bytes) exceeds the prompt cache limit; not cached", sl->n,
                   size);
        return 0;
    }
    for (size_t i = 0; i < m->n_pc;) {
        if (pc_lcp(m->pc[i].toks, m->pc[i].n, sl->toks, sl->n) == m->pc[i].n) pc_drop(m, i);
        else i++;
    }
    if (m->e->o.cache_limit > 0)
        while (m->n_pc && pc_bytes(m) + size > m->e->o.cache_limit) pc_drop(m, 0);
    pc_entry e = {0};
    e.n = sl->n;
    e.size = size;
    e.kv_len = fw_kv_bytes(sl->fw, e.n);
    e.toks = malloc(e.n * sizeof *e.toks);
    e.kv = malloc(e.kv_len ? e.kv_len : 1);
    if (m->n_pc == m->cap_pc) {
        size_t cap = m->cap_pc ? m->cap_pc * 2 : 8;
        pc_entry *np = realloc(m->pc, cap * sizeof *np);
        if (np) {
            m->pc = np;
            m->cap_pc = cap;
        }
    }
    if (!e.toks || !e.kv || m->n_pc == m->cap_pc || fw_kv_save(sl->fw, e.n, e.kv, e.kv_len) != 0) {
        /* as llama-server on bad_alloc: shrink the limit to 40 % of what is held */
        free(e.toks);
        free(e.kv);
        size_t held = pc_bytes(m);
        m->e->o.cache_limit = held * 2 / 5 > 1 ? held * 2 / 5 : 1;
        engine_log(m->e, "out of memory for the prompt cache; its limit is now %zu bytes", m->e->o.cache_limit);
        pc_update(m);
        return 0;
    }
    memcpy(e.toks, sl->toks, e.n * sizeof *e.toks);
    m->pc[m->n_pc++] = e;
    return 1;
}

/* server_prompt_cache::load: among the entries that keep at least a quarter
 * of themselves, the one that both keeps a larger fraction of itself and
 * covers a larger fraction of the prompt than the slot does (and than any
 * earlier such entry) replaces the slot's cells (whichever slot saved it).
 * -1 when a restore failed. */
static int pc_load(engine_model *m, engine_slot *sl, const int32_t *prompt, size_t n)
{
    size_t lcp = pc_lcp(sl->toks, sl->n, prompt, n);
    float f_keep_best = sl->n ? (float)lcp / (float)sl->n : -1.0f;
    float f_sim_best = (float)lcp / (float)n;
    size_t best = (size_t)-1;
    for (size_t i = 0; i < m->n_pc; i++) {
        size_t l = pc_lcp(m->pc[i].toks, m->pc[i].n, prompt, n);
        float f_keep = (float)l / (float)m->pc[i].n;
        float f_sim = (float)l / (float)n;
        if (f_keep < 0.25f) continue;
        if (f_keep_best < f_keep && f_sim_best < f_sim) {
            f_keep_best = f_keep;
            f_sim_best = f_sim;
            best = i;
        }
    }
    if (best == (size_t)-1) return 0;
    pc_entry *e = &m->pc[best];
    if (fw_kv_restore(sl->fw, e->n, e->kv, e->kv_len) != 0) return -1;
    free(sl->toks);
    sl->toks = e->toks;        /* the entry's tokens become the slot's */
    sl->n = sl->cap = e->n;
    e->toks = NULL;
    pc_drop(m, best);
    return 0;
}

/* get_available_slot's choice (see engine.h): the slot and whether the
 * host prompt cache is to be updated for it. */
static int choose_slot(const engine *e, const engine_model *m, const int32_t *prompt, size_t n, int32_t id_slot,
                       int *update)
{
    int ret = -1;
    *update = 0;
    /* llama-server computes id_slot % slots.size() in size_t: a negative id wraps as unsigned */
    if (id_slot != -1) ret = (int)((size_t)(int64_t)id_slot % (size_t)m->n_slots);
    if (e->sps != 0.0f) {
        float f_sim_best = 0;
        for (int i = 0; i < m->n_slots; i++) {
            const engine_slot *sl = &m->slots[i];
            if ((id_slot != -1 && i != id_slot) || sl->n == 0) continue;
            float f_sim = (float)pc_lcp(sl->toks, sl->n, prompt, n) / (float)n;
            if (f_sim > f_sim_best && f_sim > e->sps) {
                f_sim_best = f_sim;
                ret = i;
            }
        }
        if (ret >= 0) {
            /* an asked slot that holds nothing gives 0/0: NaN, and no update, as in llama-server */
            float f_keep = (f_sim_best * (float)n) / (float)m->slots[ret].n;
            if (f_keep < 0.5f) *update = 1;
        }
    }
    if (ret < 0) {
        int64_t t_last = -1;
        for (int i = 0; i < m->n_slots; i++)
            if (ret < 0 || m->slots[i].t_last_used < t_last) {
                t_last = m->slots[i].t_last_used;
                ret = i;
            }
        *update = 1;
    }
    return ret;
}

int engine_select(engine *e, engine_model *m, const int32_t *prompt, size_t n, int32_t id_slot)
{
    if (n == 0) return m->cur;
    int update;
    int id = choose_slot(e, m, prompt, n, id_slot, &update);
    engine_slot *sl = &m->slots[id];
    if (update && e->o.cache_on) {
        pc_save(m, sl);
        if (pc_load(m, sl, prompt, n) != 0) engine_slot_clear(sl);
        pc_update(m);
    }
    m->cur = id;
    sl->t_last_used = m->use_clock++;   /* the order of releases: requests run one at a time */
    if (e->o.cache_on)                  /* --cache-idle-slots: the others saved as the task starts */
        for (int i = 0; i < m->n_slots; i++)
            if (i != id && pc_save(m, &m->slots[i])) pc_update(m);
    engine_view_tokens(e, m);
    return id;
}

void engine_task_refused(engine *e, engine_model *m, const engine_request *rq)
{
    /* b11669 (measured): the task (unless the request posted it with others),
     * the loop's NEXT_RESPONSE, the reader's cancel for each of its tasks */
    int n_cancel = rq->n_tasks > 1 ? rq->n_tasks : 1;
    int64_t id = rq->id_task >= 0 ? rq->id_task : engine_task_ids(e, 1);
    engine_task_ids(e, 1 + n_cancel);
    engine_view_begin(e, m->cur, rq, id);
    engine_view_end(e, m->cur, m->slots[m->cur].n, -1);
}
