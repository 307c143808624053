/*
 * llama_slots.c -- llama-server b11669's slot routes: GET /slots (each
 * slot's server_slot::to_json in its only-metrics form, ?fail_on_no_slot)
 * and POST /slots/:id?action=save|restore|erase with --slot-save-path
 * (bankml's --slot-dir): its request, answers and errors, its file-name
 * rule; the files themselves are the engine's (engine/slotfile.c). See
 * llama.h and docs/modules/llama.md.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/llama_json.h"

typedef struct {
    engine *e;
    const llama_api_opts *o;
} slots_api;

/* GET /slots: a task id, then every slot as b11669 writes it. The views
 * are read without the engine lock, so a running task shows its counters. */
static void h_slots(serve_req *req, serve_resp *resp, void *ud)
{
    slots_api *api = ud;
    static engine_slot_info v[ENGINE_MAX_SLOTS];   /* filled and freed under the lock below */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    char q[64];
    size_t n_ctx = 0;
    if (!api->o->slots) {
        llama_reply_err(resp, 501, "This server does not support slots endpoint. Start it with `--slots`");
        return;
    }
    engine_task_ids(api->e, 1);
    pthread_mutex_lock(&mu);
    int n = engine_slots_info(api->e, v, ENGINE_MAX_SLOTS, &n_ctx), idle = 0;
    jbuf out;
    jbuf_init(&out);
    jbuf_putc(&out, '[');
    for (int i = 0; i < n; i++) {
        idle += !v[i].processing;
        jbuf_printf(&out, "%s{\"id\":%d,\"n_ctx\":%zu,\"speculative\":false,\"is_processing\":%s", i ? "," : "", i,
                    n_ctx, v[i].processing ? "true" : "false");
        if (v[i].has_task) {
            jbuf_printf(&out, ",\"id_task\":%lld,\"n_prompt_tokens\":%zu,\"n_prompt_tokens_processed\":%zu,"
                              "\"n_prompt_tokens_cache\":%zu,\"params\":%s,\"next_token\":[{\"has_next_token\":%s,"
                              "\"has_new_line\":%s,\"n_remain\":%d,\"n_decoded\":%zu}]",
                        (long long)v[i].id_task, v[i].n_tokens, v[i].n_processed, v[i].n_cached,
                        v[i].params ? v[i].params : "{}", v[i].has_next_token ? "true" : "false",
                        v[i].has_new_line ? "true" : "false", (int)v[i].n_remain, v[i].n_decoded);
        }
        jbuf_putc(&out, '}');
    }
    jbuf_putc(&out, ']');
    engine_slot_info_free(v, n);
    pthread_mutex_unlock(&mu);
    /* req.get_param: any value but the empty one asks for the check */
    if (serve_query_get(req, "fail_on_no_slot", q, sizeof q) != 0 && q[0] && idle == 0) {
        llama_reply_err(resp, 503, "no slot available");
    } else {
        serve_reply_json(resp, 200, &out);
    }
    jbuf_free(&out);
}

/* std::stoi: leading white space, a sign, digits (at least one), anything
 * after them ignored; out of int's range throws. 0, or -1. */
static int slots_stoi(const char *s, int *out)
{
    if (!s) return -1;
    while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
    const char *d = s + (*s == '+' || *s == '-');
    if (*d < '0' || *d > '9') return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

/* The body's "filename" as request_data.at("filename").get<std::string>()
 * reads it, then fs_validate_filename; NULL after answering. */
static json_value *slots_filename(const engine *e, serve_req *req, serve_resp *resp, const char **name, size_t *len)
{
    json_value *body = llama_parse_body(e, req, resp);
    char err[256];
    if (!body) return NULL;
    const json_value *f = body->type == JSON_OBJECT ? json_get(body, "filename") : NULL;
    if (body->type != JSON_OBJECT) {
        snprintf(err, sizeof err, "[json.exception.type_error.304] cannot use at() with %s", llama_jtype(body));
    } else if (!f) {
        snprintf(err, sizeof err, "[json.exception.out_of_range.403] key 'filename' not found");
    } else if (f->type != JSON_STRING) {
        snprintf(err, sizeof err, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(f));
    } else if (!engine_filename_valid(f->str, f->len) || memchr(f->str, 0, f->len)) {
        snprintf(err, sizeof err, "Invalid filename");
    } else {
        *name = f->str;
        *len = f->len;
        return body;
    }
    llama_reply_err(resp, 400, err);
    json_free(body);
    return NULL;
}

static void slots_answer(serve_resp *resp, int id, const char *name, size_t len, const char *what, size_t n,
                         const char *bytes_what, size_t bytes, const char *ms_what, double ms)
{
    jbuf out;
    jbuf_init(&out);
    jbuf_printf(&out, "{\"id_slot\":%d,\"filename\":", id);
    json_put_str_nl(&out, name, len);
    jbuf_printf(&out, ",\"%s\":%zu,\"%s\":%zu,\"timings\":{\"%s\":", what, n, bytes_what, bytes, ms_what);
    json_put_double(&out, ms);
    jbuf_puts(&out, "}}");
    serve_reply_json(resp, 200, &out);
    jbuf_free(&out);
}

/* POST /slots/:id?action=save|restore|erase, in b11669's order of checks:
 * the flag, the id (stoi), the action, the body and file name, then the
 * task (its id) on slot id % slots. */
static void h_slot_action(serve_req *req, serve_resp *resp, void *ud)
{
    slots_api *api = ud;
    const char *dir = api->o->slot_save_path;
    char action[32];
    int id;
    if (!dir || !dir[0]) {
        llama_reply_err(resp, 501, "This server does not support slots action. Start it with `--slot-save-path`");
        return;
    }
    if (slots_stoi(serve_param(req, "id_slot"), &id) != 0) {
        llama_reply_err(resp, 400, "Invalid slot ID");
        return;
    }
    if (serve_query_get(req, "action", action, sizeof action) != 1) action[0] = 0;
    int act = !strcmp(action, "save") ? 1 : !strcmp(action, "restore") ? 2 : !strcmp(action, "erase") ? 3 : 0;
    if (!act) {
        llama_reply_err(resp, 400, "Invalid action");
        return;
    }
    const char *name = NULL;
    size_t len = 0;
    json_value *body = NULL;
    if (act != 3 && !(body = slots_filename(api->e, req, resp, &name, &len))) return;
    engine_task_ids(api->e, 1);
    engine_model *m = llama_lock_model(api->e, NULL, resp);
    if (!m) {
        json_free(body);
        return;
    }
    engine_error er = {0};
    engine_slot_io io = {0};
    if (act == 3) {
        size_t n = engine_slot_erase(api->e, m, id);
        engine_release(api->e, ENGINE_KEEP_DEFAULT);
        jbuf out;
        jbuf_init(&out);
        jbuf_printf(&out, "{\"id_slot\":%d,\"n_erased\":%zu}", id, n);
        serve_reply_json(resp, 200, &out);
        jbuf_free(&out);
        return;
    }
    size_t dl = strlen(dir);
    char *path = malloc(dl + len + 1);
    if (!path) {
        engine_release(api->e, ENGINE_KEEP_DEFAULT);
        json_free(body);
        llama_reply_err(resp, 500, "out of memory");
        return;
    }
    memcpy(path, dir, dl);   /* params.slot_save_path + filename: the flag's value ends with '/' */
    memcpy(path + dl, name, len);
    path[dl + len] = 0;
    int rc = act == 1 ? engine_slot_save(api->e, m, id, path, &io, &er) : engine_slot_restore(api->e, m, id, path, &io, &er);
    engine_release(api->e, ENGINE_KEEP_DEFAULT);
    if (rc != 0) engine_task_ids(api->e, 1);   /* b11669 (measured): an error result, then the reader's cancel */
    if (rc != 0) llama_reply_err(resp, engine_status(er.kind), er.msg);
    else if (act == 1) slots_answer(resp, id, name, len, "n_saved", io.n_tokens, "n_written", io.n_bytes, "save_ms", io.ms);
    else slots_answer(resp, id, name, len, "n_restored", io.n_tokens, "n_read", io.n_bytes, "restore_ms", io.ms);
    free(path);
    json_free(body);
}

void *llama_slots_register(serve_server *srv, engine *e, const llama_api_opts *o)
{
    slots_api *api = calloc(1, sizeof *api);
    if (!api) return NULL;
    api->e = e;
    api->o = o;
    if (serve_route(srv, "GET", "/slots", h_slots, api, 0) != 0 ||
        serve_route(srv, "POST", "/slots/:id_slot", h_slot_action, api, 0) != 0) {
        free(api);
        return NULL;
    }
    return api;
}

void llama_slots_free(void *slots) { free(slots); }
