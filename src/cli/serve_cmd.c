/*
 * serve_cmd.c -- `bankml serve [MODEL]`: the engine with its registry, the
 * llama-server routes, bankML's status routes and Ollama's /api/ routes on
 * one HTTP server.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/llama.h"
#include "api/ollama.h"
#include "api/status.h"
#include "bankml.h"
#include "base/par.h"
#include "cli/args.h"
#include "cli/commands.h"

const command_spec serve_spec = {
    "serve",
    "serve [MODEL] [--native] [--fork F] [--registry DIR] [--ctx N] [--listen H:P] [--host H --port P] [--upstream H:P] "
    "[--api-key K] [--allow-origin O] [--keep-alive D] [--threads N] [--llama-threads N] [--cache-ram MiB] "
    "[-b N] [-ub N] [-np N]",
    0,
    {"--native"},   /* the Rust original's mode flag (Savante passes it): native is the only mode here */
    {"--fork", "--registry", "--ctx", "-c", "--threads", "--llama-threads", "-t", "--keep-alive", "--cache-ram",
     "-cram", "--listen", "--host", "--port", "--upstream", "--api-key", "--allow-origin", "-b", "--batch-size", "-ub",
     "--ubatch-size", "-np", "--parallel"},
    1};

/* The host prompt cache's limit (§1.3): --cache-ram N (MiB, llama-server's
 * flag), else BANKML_CACHE_RAM, else min(8192 MiB, a quarter of
 * MemAvailable) with a 1 MiB floor. 0 turns it off, a negative value lifts
 * the limit. 0, or -1 after printing why. */
static int cache_ram_opt(const parsed_args *a, engine_opts *o)
{
    const char *v = args_opt2(a, "--cache-ram", "-cram");
    long long mib = 8192;
    if (!v) v = getenv("BANKML_CACHE_RAM");
    if (!(v && *v)) {
        FILE *f = fopen("/proc/meminfo", "r");
        char line[256];
        long long kb = -1;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
        if (f) fclose(f);
        if (kb > 0 && kb / 1024 / 4 < mib) mib = kb / 1024 / 4;
        if (mib < 1) mib = 1;
        v = NULL;
    }
    if (v) {
        char *end;
        errno = 0;
        mib = strtoll(v, &end, 10);
        if (errno || end == v || *end || mib > (long long)(SIZE_MAX >> 20)) {
            fprintf(stderr, "bankml serve: --cache-ram wants a number of MiB (0 = off, -1 = no limit), not %s\n", v);
            return -1;
        }
    }
    o->cache_on = mib != 0;
    o->cache_limit = mib > 0 ? (size_t)mib << 20 : 0;
    return 0;
}

/* The engine's options from the flags. 0, or -1 after printing why. */
static int read_opts(const parsed_args *a, engine_opts *o)
{
    long x;
    const char *v;
    memset(o, 0, sizeof *o);
    o->log_name = "bankml serve";
    o->keep_alive_ms = 5 * 60 * 1000;
    if (args_long(&serve_spec, "--ctx", args_opt2(a, "--ctx", "-c"), 1, 1 << 24, 4096, &x)) return -1;
    o->n_ctx = (size_t)x;
    if (args_long(&serve_spec, "--threads", args_opt(a, "--threads"), 1, PAR_MAX_THREADS, engine_default_threads(),
                  &x))
        return -1;
    o->threads = (int)x;
    if (args_long(&serve_spec, "--llama-threads", args_opt2(a, "--llama-threads", "-t"), 1, 1024, 2, &x)) return -1;
    o->llama_threads = (int)x;
    /* llama-server's batch sizes and slots (engine_new refuses what is not reproduced) */
    if (args_long(&serve_spec, "-b", args_opt2(a, "-b", "--batch-size"), 1, 65536, 2048, &x)) return -1;
    o->n_batch = (size_t)x;
    if (args_long(&serve_spec, "-ub", args_opt2(a, "-ub", "--ubatch-size"), 1, 65536, 512, &x)) return -1;
    o->n_ubatch = (size_t)x;
    if (args_long(&serve_spec, "-np", args_opt2(a, "-np", "--parallel"), -1, 256, 1, &x)) return -1;
    if (x == 0) {
        fprintf(stderr, "bankml serve: -np wants a number of slots (1 or more; -1 is llama-server's auto)\n");
        return -1;
    }
    o->n_parallel = (int)x;
    if ((v = args_opt(a, "--keep-alive")) && args_duration_ms(v, &o->keep_alive_ms) != 0) {
        fprintf(stderr, "bankml serve: --keep-alive wants a duration (30s, 5m, 1h, -1), not %s\n", v);
        return -1;
    }
    return cache_ram_opt(a, o);
}

/* The registry: the startup model first, then the fork's or the
 * directory's pins; the default is the startup model or the first pinned
 * file that is here. 0, or -1 after printing why. */
static int fill_registry(engine *e, const char *model, const char *fork, const char *dir)
{
    char fdir[4096], mdir[4096 + 8];
    snprintf(fdir, sizeof fdir, "%s", fork);
    char *slash = strrchr(fdir, '/');
    if (slash) *slash = 0;
    else snprintf(fdir, sizeof fdir, ".");
    snprintf(mdir, sizeof mdir, "%s/models", fdir);
    if (model) {
        struct stat st;
        if (stat(model, &st) != 0) {
            fprintf(stderr, "bankml serve: cannot read %s: %s\n", model, strerror(errno));
            return -1;
        }
        engine_add(e, model, model, fork, 1);
    }
    if (dir) {
        char near[4096];
        snprintf(near, sizeof near, "%s", model ? model : dir);
        char *s2 = strrchr(near, '/');
        if (model && s2) *s2 = 0;
        else if (model) snprintf(near, sizeof near, ".");
        engine_add_dir(e, dir, near);
    } else if (!model) {
        engine_add_fork(e, fork, fdir, mdir);
    }
    if (engine_n_entries(e) == 0) {
        fprintf(stderr, "bankml serve: no model: name one, or a --registry whose FORK.json files pin some\n");
        return -1;
    }
    engine_entry en;
    for (size_t i = 0; !model && engine_entry_get(e, i, &en) == 0; i++)
        if (en.present) {
            engine_set_default(e, i);
            break;
        }
    return 0;
}

static void print_start(engine *e, const char *listen, const char *upstream)
{
    engine_entry en, def;
    engine_status_info st;
    jbuf names;
    jbuf_init(&names);
    for (size_t i = 0; engine_entry_get(e, i, &en) == 0; i++) jbuf_printf(&names, "%s%s", i ? ", " : "", en.name);
    engine_entry_get(e, engine_default(e), &def);
    engine_status_get(e, &st);
    free(st.verified_json);
    fprintf(stderr, "bankml serve %s --native: %s verified (sha256 %s); models %s; listening on http://%s%s%s\n",
            BANKML_VERSION, def.path, st.last_sha, names.p ? names.p : "", listen,
            upstream ? " and, for llama-server's clients, http://" : "", upstream ? upstream : "");
    jbuf_free(&names);
}

/* The HTTP server with every route, listening. NULL after printing why. */
static serve_server *open_server(engine *e, const parsed_args *a, const char *listen, const char *upstream,
                                 const char *dir, llama_api **la, status_api **sa)
{
    char err[1024];
    serve_opts so;
    serve_opts_default(&so);
    /* llama-server reads any POST body as JSON whatever its Content-Type, and
     * `curl -d` sends form encoding: refusing it would break its clients. */
    so.json_posts_only = 0;
    so.api_keys = args_opt(a, "--api-key");
    so.allow_origins = args_opt(a, "--allow-origin");
    serve_server *srv = serve_new(&so, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "bankml serve: %s\n", err);
        return NULL;
    }
    *la = llama_api_register(srv, e);
    *sa = status_register(srv, e, upstream);
    if (!*la || !*sa || ollama_register(srv, e, dir) != 0) {   /* Ollama's /api/ routes on the same engine */
        fprintf(stderr, "bankml serve: out of memory\n");
        serve_free(srv);
        return NULL;
    }
    if (serve_listen(srv, listen, err, sizeof err) < 0) {
        fprintf(stderr, "bankml serve: %s\n", err);
        serve_free(srv);
        return NULL;
    }
    if (upstream && serve_listen(srv, upstream, err, sizeof err) < 0) {
        fprintf(stderr, "bankml serve: cannot listen on the engine address %s: %s (is llama-server running there?)\n",
                upstream, err);
        serve_free(srv);
        return NULL;
    }
    return srv;
}

int cmd_serve(int argc, char **argv)
{
    parsed_args a;
    engine_opts o;
    engine_error er = {0};
    char listen_buf[300];
    llama_api *la = NULL;
    status_api *sa = NULL;
    if (args_parse(&serve_spec, argc, argv, &a) || read_opts(&a, &o)) return BANKML_EXIT_IO;
    const char *model = a.n_pos ? a.pos[0] : NULL, *fork = args_opt(&a, "--fork"), *dir = args_opt(&a, "--registry");
    const char *listen = args_opt(&a, "--listen"), *upstream = args_opt(&a, "--upstream");
    if (!fork) fork = "models.FORK.json";
    if (!listen) listen = "127.0.0.1:18093";
    if (args_opt(&a, "--port")) {
        const char *h = args_opt(&a, "--host");
        snprintf(listen_buf, sizeof listen_buf, "%s:%s", h ? h : "127.0.0.1", args_opt(&a, "--port"));
        listen = listen_buf;
    }
    engine *e = engine_new(&o, &er);
    if (!e) {
        fprintf(stderr, "bankml serve: %s\n", er.msg);
        return BANKML_EXIT_IO;
    }
    if (fill_registry(e, model, fork, dir) != 0) {
        engine_free(e);
        return BANKML_EXIT_IO;
    }
    if (!engine_acquire(e, engine_default(e), NULL, &er)) {
        fprintf(stderr, "bankml serve: %s\n", er.msg);
        engine_free(e);
        return er.kind == ENGINE_NOT_FOUND || er.kind == ENGINE_INTERNAL ? BANKML_EXIT_IO : BANKML_REFUSE;
    }
    engine_release(e, ENGINE_KEEP_DEFAULT);
    serve_server *srv = open_server(e, &a, listen, upstream, dir, &la, &sa);
    if (!srv) {
        llama_api_free(la);
        status_free(sa);
        engine_free(e);
        return BANKML_EXIT_IO;
    }
    serve_install_signals(srv);
    engine_start_reaper(e);
    print_start(e, listen, upstream);
    int rc = serve_run(srv);
    serve_free(srv);
    llama_api_free(la);
    status_free(sa);
    engine_free(e);
    return rc == 0 ? BANKML_OK : BANKML_EXIT_IO;
}
