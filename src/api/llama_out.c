/*
 * llama_out.c -- llama-server b11669's answer shapes: timings, usage,
 * probabilities and generation_settings, byte for byte. See llama_json.h.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api/llama_json.h"

void llama_random_id(char *out, size_t n)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[64];
    if (n > sizeof r + 1) n = sizeof r + 1;
    if (getrandom(r, n - 1, 0) != (ssize_t)(n - 1))
        for (size_t i = 0; i + 1 < n; i++) r[i] = (unsigned char)rand();
    for (size_t i = 0; i + 1 < n; i++) out[i] = al[r[i] % 62];
    out[n - 1] = 0;
}

void llama_put_timings(jbuf *b, const engine_result *g)
{
    double pms = g->t_prompt_last ? (double)(g->t_prompt_last - g->t_start) / 1000.0 : 0.0;
    int64_t gus = g->t_gen_last ? (g->t_gen_last - g->t_prompt_last > 1 ? g->t_gen_last - g->t_prompt_last : 1) : 0;
    double gms = (double)gus / 1000.0;
    size_t steps = g->n_decoded > 0 ? g->n_decoded - 1 : 0;
    jbuf_printf(b, "{\"cache_n\":%zu,\"prompt_n\":%zu,\"prompt_ms\":", g->n_cached, g->n_processed);
    json_put_double(b, pms);
    jbuf_puts(b, ",\"prompt_per_token_ms\":");
    json_put_double(b, g->n_processed ? pms / (double)g->n_processed : 0.0);
    jbuf_puts(b, ",\"prompt_per_second\":");
    json_put_double(b, pms > 0 ? 1e3 / pms * (double)g->n_processed : 0.0);
    jbuf_printf(b, ",\"predicted_n\":%zu,\"predicted_ms\":", g->n_decoded);
    json_put_double(b, gms);
    jbuf_puts(b, ",\"predicted_per_token_ms\":");
    json_put_double(b, steps ? gms / (double)steps : 0.0);
    jbuf_puts(b, ",\"predicted_per_second\":");
    json_put_double(b, gms > 0 ? 1e3 / gms * (double)steps : 0.0);
    jbuf_putc(b, '}');
}

int llama_partial_timed(const engine_request *rq, int stop_now)
{
    return stop_now || rq->timings_per_token;
}

void llama_put_progress(jbuf *b, const engine_progress *p)
{
    jbuf_printf(b, "{\"total\":%zu,\"cache\":%zu,\"processed\":%zu,\"time_ms\":%lld}", p->total, p->cache,
                p->processed, (long long)p->time_ms);
}

void llama_put_usage(jbuf *b, const engine_result *g)
{
    jbuf_printf(b, "{\"completion_tokens\":%zu,\"prompt_tokens\":%zu,\"total_tokens\":%zu,"
                   "\"prompt_tokens_details\":{\"cached_tokens\":%zu}}",
                g->n_decoded, g->n_prompt, g->n_decoded + g->n_prompt, g->n_cached);
}

/* A token's text as llama-server prints it: cut at an incomplete UTF-8 end
 * (validate_utf8), other bytes as they are. */
static void put_tok_text(jbuf *b, const char *s, size_t n)
{
    json_put_str_nl(b, s, engine_utf8_complete(s, n));
}

void llama_put_bytes(jbuf *b, const char *s, size_t n)
{
    jbuf_putc(b, '[');
    for (size_t i = 0; i < n; i++) jbuf_printf(b, i ? ",%u" : "%u", (unsigned char)s[i]);
    jbuf_putc(b, ']');
}

static void put_logprob(jbuf *b, float p)
{
    json_put_double(b, (double)(p == 0.0f ? -FLT_MAX : logf(p)));
}

/* probs_vector_to_json over tokens [a, z). */
void llama_put_probs(jbuf *b, const engine_model *m, const engine_token *t, size_t a, size_t z)
{
    jbuf piece;
    jbuf_init(&piece);
    jbuf_putc(b, '[');
    for (size_t i = a; i < z; i++) {
        if (i > a) jbuf_putc(b, ',');
        jbuf_printf(b, "{\"id\":%d,\"token\":", (int)t[i].tok);
        put_tok_text(b, t[i].text, t[i].text_len);
        jbuf_puts(b, ",\"bytes\":");
        llama_put_bytes(b, t[i].text, t[i].text_len);
        if (t[i].post) {
            jbuf_puts(b, ",\"prob\":");
            json_put_double(b, (double)t[i].p);
            jbuf_puts(b, ",\"top_probs\":[");
        } else {
            jbuf_puts(b, ",\"logprob\":");
            put_logprob(b, t[i].p);
            jbuf_puts(b, ",\"top_logprobs\":[");
        }
        for (size_t k = 0; k < t[i].n_top; k++) {
            jbuf_reset(&piece);
            engine_piece(m, t[i].top[k].id, 0, &piece);
            const char *ps = piece.p ? piece.p : "";
            jbuf_printf(b, "%s{\"id\":%d,\"token\":", k ? "," : "", (int)t[i].top[k].id);
            put_tok_text(b, ps, piece.len);
            jbuf_puts(b, ",\"bytes\":");
            llama_put_bytes(b, ps, piece.len);
            if (t[i].post) {
                jbuf_puts(b, ",\"prob\":");
                json_put_double(b, (double)t[i].top[k].p);
            } else {
                jbuf_puts(b, ",\"logprob\":");
                put_logprob(b, t[i].top[k].p);
            }
            jbuf_putc(b, '}');
        }
        jbuf_puts(b, "]}");
    }
    jbuf_putc(b, ']');
    jbuf_free(&piece);
}

/* The answer's message content as llama-server's chat parser gives it.
 * Templates with a <think> block get a parser that trims the content's
 * surrounding whitespace (a whitespace-only answer parses to nothing);
 * the others are content-only. */
static const char *sampler_name(int s)
{
    switch (s) {
    case SMP_DRY: return "dry";
    case SMP_TOP_K: return "top_k";
    case SMP_TOP_P: return "top_p";
    case SMP_MIN_P: return "min_p";
    case SMP_TYPICAL_P: return "typ_p";
    case SMP_TEMPERATURE: return "temperature";
    case SMP_XTC: return "xtc";
    case SMP_INFILL: return "infill";
    case SMP_PENALTIES: return "penalties";
    case SMP_TOP_N_SIGMA: return "top_n_sigma";
    default: return "adaptive_p";
    }
}

static void putf(jbuf *b, const char *key, float v)
{
    jbuf_printf(b, ",\"%s\":", key);
    json_put_double(b, (double)v);
}

/* generation_settings / task_params::to_json: props 0 the answer's whole
 * form, 1 the only-metrics form; reasoning, chat_format and the generation
 * prompt as the task has them. */
static void put_settings(jbuf *b, const engine_request *g, int stream, int props, const char *reasoning,
                         const char *chat_format, const char *gp, size_t gp_len)
{
    const sampler_params *p = &g->sp;
    jbuf_printf(b, "{\"seed\":%u", p->seed);
    putf(b, "temperature", p->temp);
    putf(b, "dynatemp_range", p->dynatemp_range);
    putf(b, "dynatemp_exponent", p->dynatemp_exponent);
    jbuf_printf(b, ",\"top_k\":%d", (int)p->top_k);
    putf(b, "top_p", p->top_p);
    putf(b, "min_p", p->min_p);
    putf(b, "top_n_sigma", p->top_n_sigma);
    putf(b, "xtc_probability", p->xtc_probability);
    putf(b, "xtc_threshold", p->xtc_threshold);
    putf(b, "typical_p", p->typ_p);
    jbuf_printf(b, ",\"repeat_last_n\":%d", (int)p->penalty_last_n);
    putf(b, "repeat_penalty", p->penalty_repeat);
    putf(b, "presence_penalty", p->penalty_present);
    putf(b, "frequency_penalty", p->penalty_freq);
    putf(b, "dry_multiplier", p->dry_multiplier);
    putf(b, "dry_base", p->dry_base);
    jbuf_printf(b, ",\"dry_allowed_length\":%d,\"dry_penalty_last_n\":%d", (int)p->dry_allowed_length,
                (int)p->dry_penalty_last_n);
    if (!props) {
        jbuf_puts(b, ",\"dry_sequence_breakers\":[");
        for (size_t i = 0; i < p->n_dry_breakers; i++) {
            if (i) jbuf_putc(b, ',');
            json_put_str_nl(b, p->dry_breakers[i], p->dry_breaker_lens[i]);
        }
        jbuf_putc(b, ']');
    }
    jbuf_printf(b, ",\"mirostat\":%d", (int)p->mirostat);
    putf(b, "mirostat_tau", p->mirostat_tau);
    putf(b, "mirostat_eta", p->mirostat_eta);
    putf(b, "adaptive_target", p->adaptive_target);
    putf(b, "adaptive_decay", p->adaptive_decay);
    if (!props) {
        jbuf_puts(b, ",\"stop\":[");
        for (size_t i = 0; i < g->n_stops; i++) {
            if (i) jbuf_putc(b, ',');
            json_put_str_nl(b, g->stops[i], g->stop_lens[i]);
        }
        jbuf_putc(b, ']');
    }
    jbuf_printf(b, ",\"max_tokens\":%d,\"n_predict\":%d,\"n_keep\":%d,\"n_discard\":%d,\"ignore_eos\":%s,"
                   "\"stream\":%s", (int)g->n_predict, (int)g->n_predict, (int)g->n_keep,
                (int)g->n_discard, g->ignore_eos ? "true" : "false", stream ? "true" : "false");
    if (!props) {
        /* llama_logit_bias as nlohmann's (sorted) object: -inf has no JSON, so null */
        jbuf_puts(b, ",\"logit_bias\":[");
        for (size_t i = 0; i < g->n_bias; i++) {
            jbuf_puts(b, i ? ",{\"bias\":" : "{\"bias\":");
            if (isfinite(g->bias[i].bias)) json_put_double(b, (double)g->bias[i].bias);
            else jbuf_puts(b, "null");
            jbuf_printf(b, ",\"token\":%d}", (int)g->bias[i].token);
        }
        jbuf_putc(b, ']');
    }
    jbuf_printf(b, ",\"n_probs\":%d,\"min_keep\":%d", (int)p->n_probs, (int)p->min_keep);
    if (!props) {
        jbuf_puts(b, ",\"grammar\":");
        json_put_str_nl(b, g->grammar_text ? g->grammar_text : "", g->grammar_text ? g->grammar_len : 0);
        jbuf_printf(b, ",\"grammar_lazy\":%s,\"grammar_triggers\":[", g->grammar_lazy ? "true" : "false");
        for (size_t i = 0; i < g->n_triggers; i++) {
            const gr_trigger *t = &g->triggers[i];
            jbuf_printf(b, "%s{\"type\":%d,\"value\":", i ? "," : "", t->type);
            json_put_str_nl(b, t->value, t->len);
            if (t->type == GR_TRIGGER_TOKEN) jbuf_printf(b, ",\"token\":%d", (int)t->token);
            jbuf_putc(b, '}');
        }
        jbuf_puts(b, "],\"preserved_tokens\":[");
        for (size_t i = 0; i < g->n_preserved; i++) jbuf_printf(b, "%s%d", i ? "," : "", (int)g->preserved[i]);
        jbuf_putc(b, ']');
    }
    jbuf_printf(b, ",\"chat_format\":\"%s\",\"reasoning_format\":\"%s\",\"reasoning_in_content\":false,"
                   "\"generation_prompt\":", chat_format, reasoning);
    json_put_str_nl(b, gp, gp_len);
    jbuf_puts(b, ",\"samplers\":[");
    for (size_t i = 0; i < p->n_order; i++) jbuf_printf(b, "%s\"%s\"", i ? "," : "", sampler_name(p->order[i]));
    jbuf_printf(b, "],\"speculative.types\":\"none\",\"timings_per_token\":%s,\"post_sampling_probs\":%s,"
                   "\"backend_sampling\":false,\"lora\":[]}",
                g->timings_per_token ? "true" : "false", p->post_sampling_probs ? "true" : "false");
}

void llama_put_gen_settings(jbuf *b, const engine_request *g, int stream, int props)
{
    /* reasoning_format (measured): the server's default "none" in /props, the request's "deepseek" in answers */
    put_settings(b, g, stream, props, props ? "none" : "deepseek", "Content-only", "", 0);
}

int llama_task_params(const engine_model *m, const llama_pre *pre, const engine_request *rq, jbuf *out)
{
    if (!pre->chat) {
        put_settings(out, rq, rq->stream, 1, "deepseek", "Content-only", "", 0);
        return out->oom ? -1 : 0;
    }
    /* common_chat_template_generation_prompt: what the generation prompt adds to the render without it; the
     * chat goes through b11669's differential autoparser ("peg-native") */
    jbuf gp;
    char err[256];
    jbuf_init(&gp);
    int rc = engine_generation_prompt(m, pre->messages, &gp, err, sizeof err);
    put_settings(out, rq, rq->stream, 1, "deepseek", "peg-native", rc == 0 && gp.p ? gp.p : "", rc == 0 ? gp.len : 0);
    jbuf_free(&gp);
    return out->oom ? -1 : 0;
}


size_t llama_probs_kept(const engine_model *m, const engine_request *rq, const engine_result *r)
{
    size_t keep = r->n_probs_out;
    if (r->stop == ENGINE_STOP_WORD) {
        int32_t *sw = NULL;
        size_t nsw = 0;
        char err[128];
        engine_tokenize_with(m, rq->stops[r->stop_word], rq->stop_lens[r->stop_word], 0, 0, &sw, &nsw,
                     err, sizeof err);
        keep -= nsw < keep ? nsw : keep;
        free(sw);
    }
    return keep;
}

void llama_select_fields(jbuf *out, const json_value *paths)
{
    char err[128];
    json_value *all = json_parse(out->p, out->len, err, sizeof err);
    jbuf r;
    if (!all) return;
    jbuf_init(&r);
    jbuf_putc(&r, '{');
    size_t n_put = 0;
    for (size_t i = 0; i < paths->n; i++) {
        const json_value *path = paths->items[i], *cur = all;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = paths->items[j]->len == path->len && !memcmp(paths->items[j]->str, path->str, path->len);
        if (seen) continue;
        /* string_split<std::string>(path, '/'): every part, empty ones too */
        for (size_t a = 0; cur && a <= path->len;) {
            const char *sl = memchr(path->str + a, '/', path->len - a);
            size_t z = sl ? (size_t)(sl - path->str) : path->len;
            const json_value *next = NULL;
            if (cur->type == JSON_OBJECT)
                for (size_t k = 0; k < cur->n && !next; k++)
                    if (cur->key_lens[k] == z - a && !memcmp(cur->keys[k], path->str + a, z - a)) next = cur->items[k];
            cur = next;
            a = z + 1;
        }
        if (!cur) continue;
        if (n_put++) jbuf_putc(&r, ',');
        json_put_str_nl(&r, path->str, path->len);
        jbuf_putc(&r, ':');
        json_put_nl_dump(&r, cur, -1);
    }
    jbuf_putc(&r, '}');
    if (!r.oom) {
        jbuf_reset(out);
        jbuf_put(out, r.p, r.len);
    }
    jbuf_free(&r);
    json_free(all);
}

void llama_put_native_final(jbuf *b, const llama_final *f)
{
    static const char *const st_names[] = {"none", "eos", "word", "limit"};
    const engine_request *rq = f->rq;
    const engine_result *g = f->g;
    char err[256];
    jbuf out, d;
    jbuf_init(&out);
    jbuf_init(&d);
    jbuf_printf(&out, "{\"index\":%d,\"content\":", f->index);
    if (rq->stream) jbuf_puts(&out, "\"\"");
    else json_put_str_nl(&out, g->text.p ? g->text.p : "", g->text.len);
    jbuf_puts(&out, ",\"tokens\":[");
    for (size_t i = 0; !rq->stream && i < g->n_gen_ids; i++) jbuf_printf(&out, i ? ",%d" : "%d", (int)g->gen_ids[i]);
    jbuf_printf(&out, "],\"id_slot\":%d,\"stop\":true,\"model\":", g->id_slot);
    json_put_cstr_nl(&out, f->model_name);
    jbuf_printf(&out, ",\"tokens_predicted\":%zu,\"tokens_evaluated\":%zu,\"generation_settings\":", g->n_decoded,
                g->n_prompt);
    if (f->pre && f->pre->chat) {
        jbuf gp;
        jbuf_init(&gp);
        int rc = engine_generation_prompt(f->m, f->pre->messages, &gp, err, sizeof err);
        put_settings(&out, rq, rq->stream, 0, "deepseek", "peg-native", rc == 0 && gp.p ? gp.p : "",
                     rc == 0 ? gp.len : 0);
        jbuf_free(&gp);
    } else {
        llama_put_gen_settings(&out, rq, rq->stream, 0);
    }
    jbuf_puts(&out, ",\"prompt\":");
    engine_detokenize(f->m, f->ids, f->n_ids, 0, 1, &d, err, sizeof err);
    json_put_str_nl(&out, d.p ? d.p : "", d.len);
    jbuf_printf(&out, ",\"has_new_line\":%s,\"truncated\":%s,\"stop_type\":\"%s\",\"stopping_word\":",
                f->has_new_line ? "true" : "false", g->truncated ? "true" : "false", st_names[g->stop]);
    if (g->stop == ENGINE_STOP_WORD) json_put_str_nl(&out, rq->stops[g->stop_word], rq->stop_lens[g->stop_word]);
    else jbuf_puts(&out, "\"\"");
    jbuf_printf(&out, ",\"tokens_cached\":%zu,\"timings\":", engine_model_n_slot(f->m));
    llama_put_timings(&out, g);
    if (!rq->stream && rq->sp.n_probs > 0 && g->n_probs_out) {
        jbuf_puts(&out, ",\"completion_probabilities\":");
        llama_put_probs(&out, f->m, g->probs, 0, llama_probs_kept(f->m, rq, g));
    }
    jbuf_putc(&out, '}');
    if (f->fields) llama_select_fields(&out, f->fields);
    jbuf_put(b, out.p, out.len);
    if (out.oom) b->oom = 1;
    jbuf_free(&d);
    jbuf_free(&out);
}

void llama_put_native_partial(jbuf *b, const engine_model *m, const engine_request *rq, const engine_token *t,
                              int stop_now, const engine_result *g, int index)
{
    jbuf_printf(b, "{\"index\":%d,\"content\":", index);
    json_put_str_nl(b, t->text, t->text_len);
    jbuf_printf(b, ",\"tokens\":[%d],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":%zu,"
                   "\"tokens_evaluated\":%zu", (int)t->tok, g->n_decoded, g->n_prompt);
    if (llama_partial_timed(rq, stop_now)) {
        jbuf_puts(b, ",\"timings\":");
        llama_put_timings(b, g);
    }
    if (rq->sp.n_probs > 0) {
        jbuf_puts(b, ",\"completion_probabilities\":");
        llama_put_probs(b, m, t, 0, 1);
    }
    jbuf_putc(b, '}');
}

void llama_put_native_progress(jbuf *b, const engine_request *rq, const engine_progress *p, const engine_result *g,
                               int index)
{
    jbuf_printf(b, "{\"index\":%d,\"content\":\"\",\"tokens\":[0],\"stop\":false,\"id_slot\":-1,"
                   "\"tokens_predicted\":%zu,\"tokens_evaluated\":%zu", index, g->n_decoded, g->n_prompt);
    if (rq->timings_per_token) {
        jbuf_puts(b, ",\"timings\":");
        llama_put_timings(b, g);
    }
    jbuf_puts(b, ",\"prompt_progress\":");
    llama_put_progress(b, p);
    jbuf_putc(b, '}');
}
