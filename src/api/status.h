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

#endif
