/*
 * status.h -- bankML's routes about the server itself (api/status.c):
 * /bankml, /metrics, /bankml/metrics, /bankml/usage, /bankml/status and /
 * (the chat page of api/ui.h for a browser).
 */
#ifndef BANKML_STATUS_H
#define BANKML_STATUS_H

#include "api/serve.h"
#include "engine/engine.h"

typedef struct status_api status_api;

/* Registers the routes on srv; upstream is the llama-server address
 * /bankml names (NULL: none). NULL out of memory. */
status_api *status_register(serve_server *srv, engine *e, const char *upstream);
void status_free(status_api *api);
/* llama-server's --metrics: off, GET /metrics answers its 501 (the
 * default after status_register is on). */
void status_set_metrics(status_api *api, int on);
/* llama-server's --no-ui: off, GET / answers a browser with the text line
 * too, not the chat page (the default after status_register is on). */
void status_set_ui(status_api *api, int on);

/* The machine and n processes (pids[i], 0 for this one, named names[i]; at
 * most 64; one that cannot be read is left out) sampled over interval_ms:
 * /bankml/usage's object (source, cores, memory and swap, rss_bytes and
 * cpu_percent summed, interval_ms, processes [name, pid, rss_bytes,
 * cpu_percent], package_watts from RAPL or null, gpus, gpu_limiter),
 * appended to out. CPU% = (utime + stime) ticks over the interval x 100
 * (100 is one core), rounded to one decimal. 0, or -1 out of memory. */
int status_usage_json(const long *pids, const char *const *names, size_t n, int interval_ms, jbuf *out);

#endif
