/*
 * llama.h -- llama-server b11669's HTTP API on the engine (api/llama.c):
 * its routes, their request fields (api/llama_req.c) and answer shapes
 * (api/llama_out.c), registered on a serve.c server.
 */
#ifndef BANKML_LLAMA_H
#define BANKML_LLAMA_H

#include "api/serve.h"
#include "engine/engine.h"

typedef struct llama_api llama_api;

/* Registers /v1/chat/completions, /completion, /tokenize, /detokenize,
 * /apply-template, /props, /health, /v1/models and the 404 handler on srv,
 * answering from e. The handle lives until llama_api_free (after the
 * server stops). NULL out of memory. */
llama_api *llama_api_register(serve_server *srv, engine *e);
void llama_api_free(llama_api *api);

/* api/llama_compat.c, registered by llama_api_register: /v1/completions,
 * /v1/responses, /v1/messages and /v1/messages/count_tokens on the same
 * slot, and llama-server's refusals of /embedding(s), /rerank, /infill
 * (without FIM tokens), POST /props and POST /slots/:id. The handle, freed
 * by llama_compat_free; NULL out of memory. */
void *llama_compat_register(serve_server *srv, engine *e);
void llama_compat_free(void *compat);

#endif
