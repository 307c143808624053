/*
 * ollama_int.h -- what the Ollama module's files share inside src/api:
 * ollama_names.c (the pure parts), ollama_store.c (header listings, pins,
 * derived models and their manifests, `bankml create`), ollama_chat.c
 * (tools and think through llama-server's chat layer) and ollama.c (the
 * HTTP routes). Nothing outside these four includes it.
 */
#ifndef BANKML_OLLAMA_INT_H
#define BANKML_OLLAMA_INT_H

#include <pthread.h>

#include "api/llama_json.h"
#include "api/ollama.h"
#include "base/json.h"
#include "engine/engine.h"
#include "file/gguf.h"
#include "file/pin.h"

/* What /api/tags, /api/show and /api/ps say about a file, from its header
 * alone: reading the header never maps or verifies the weights, so a
 * listing does not evict the resident model. */
typedef struct {
    int done, ok;
    char *details;             /* the members after parent_model: "format":..,"quantization_level":.. */
    char *model_info;          /* {...} */
    char *tmpl;                /* tokenizer.chat_template, or "" */
    char *params;              /* the GGUF's sampling defaults as Modelfile lines */
    size_t ctx_len;
    int64_t size, mtime_ns;
    int native;                /* engine_header_info: bankml plays it */
    char *why;                 /* its reason when not, else NULL */
} hinfo;

/* A pinned file as create sees it (from the engine's registry when serving,
 * from the registry folder's FORK.json files on the command line). */
typedef struct {
    char name[256], file[256], path[4096], fork[4096];
    int present;
} pin_ent;

typedef struct {
    char name[132];            /* bare, lower-cased */
    char created_at[40];
    char digest[80];           /* "sha256:<hex>" */
    char base_name[256];       /* the pin's registry name */
    char base_sha[65];
    char *layer;               /* the layer's canonical JSON text */
    char *manifest;
} derived;

typedef struct {
    pthread_mutex_t mu;        /* the derived list, the header cache, what /api/ps names */
    char *dir;                 /* --registry, or NULL */
    derived *d;
    size_t n_d;
    hinfo *hi;                 /* per registry entry */
    size_t n_hi;
    /* /api/ps: the model whose request (re)loaded the weights */
    long ps_idx;
    char ps_tag[300];
    char ps_digest[80];
    char ps_parent[300];
    size_t ps_ctx;
    int64_t default_keep_ms;
    engine *e;                 /* the engine every route answers from */
} ol_state;

/* The module's one state (ollama_store.c defines it). */
extern ol_state ol;


void ol_rfc3339_parts(int64_t sec, long nsec, char out[40]);
char *ol_dup_n(const char *s, size_t n);
void ol_fmt_param(jbuf *b, const char *k, const char *v);
void ol_hinfo_fill(hinfo *hi, const char *path);
void ol_hinfo_free(hinfo *hi);
int ol_pinned_sha(const char *fork, const char *file, char sha[65]);
const derived *ol_find_derived(const derived *d, size_t n, const char *asked);
void ol_derived_free(derived *d);
void ol_derived_load_dir(const char *dir, const pin_ent *pins, size_t n_pins, derived **out, size_t *n_out);
size_t ol_pins_from_engine(pin_ent **out);
size_t ol_pins_from_dir(const char *dir, pin_ent **out);
int ol_in_list(const char *const *l, const char *s);
int ol_write_manifest(const char *dir, const char *name, const pin_ent *base, const char *base_sha,
                          const char *layer_text, derived *out, char *err, size_t errlen);
int ol_create_model(const char *dir, const char *asked, const ollama_modelfile *mf, const json_value *req,
                        const pin_ent *pins, size_t n_pins, const derived *ds, size_t n_ds, derived *out,
                        char *err, size_t errlen);

/* Options that only place the model (threads, GPUs, mmap): Ollama takes
 * them, they change no answer. */
extern const char *const OL_RESOURCE_OPTS[];

/* A float64 as Go's encoding/json writes it (ollama_chat.c). */
void ol_put_float64(jbuf *b, double v);

/* ---- tools and think (ollama_chat.c) ---- */

/* One request's chat layer: the llama-server body it stands for and b11669's
 * chat format over it (llama_chat.c). */
typedef struct {
    int on;                    /* tools or think asked: the chat layer renders and parses this request */
    int think;                 /* -1 not set, 0 false, 1 true */
    int streamed;              /* the answer is streamed (no raw-text fallback at the end) */
    json_value *doc;           /* {"messages", "tools", "chat_template_kwargs": {"enable_thinking"}} */
    llama_pre pre;             /* llama_read_pre over doc */
    llama_chat layer;
    size_t calls_sent;         /* tool calls written so far */
} ol_chat;

/* What one parse adds to the answer: content and thinking deltas, and the
 * whole tool calls not yet sent, as api.ToolCall objects joined by ','. */
typedef struct {
    jbuf content, thinking, calls;
    size_t n_calls;
} ol_chat_out;

void ol_chat_init(ol_chat *oc);
void ol_chat_free(ol_chat *oc);
void ol_chat_out_init(ol_chat_out *o);
void ol_chat_out_reset(ol_chat_out *o);
void ol_chat_out_free(ol_chat_out *o);
/* Ollama's `think` (api.ThinkValue): *think -1 (absent or null), 0 or 1; a
 * level ("high", "medium", "low") gets Ollama's 400 for a model without its
 * harmony parser; other values Ollama's unmarshal errors. 0, or -1 with err. */
int ol_read_think(const json_value *body, int *think, char *err, size_t errlen);
/* With tools (chat, a non-empty array) or think set: the llama-server body
 * of msgs (the conversation in OpenAI's shape, build_messages'), read by
 * llama_read_pre (its tool checks); oc->on set. Nothing asked: 0, off. 0, or
 * -1 with the 400 message. */
int ol_chat_begin(ol_chat *oc, const json_value *body, const json_value *msgs, int generate, int think, char *err,
                  size_t errlen);
/* With the model held: llama_chat_prepare over the (fitted) messages use
 * into rq (grammar, triggers, preserved tokens, stops, prefill), think true
 * refused as Ollama refuses it for a template without thinking tags (tag:
 * the model's name), then the prompt rendered with the tools and
 * enable_thinking. 0, or -1 with the 400 message. */
int ol_chat_prepare(ol_chat *oc, engine_model *m, const json_value *use, const char *tag, engine_request *rq,
                    jbuf *prompt, char *err, size_t errlen);
/* The answer so far raw[0..n) parsed (partial: while it grows); what it
 * adds appended to out. 0, or -1 with the parse's error or a tool call
 * whose arguments are not an object. */
int ol_chat_update(ol_chat *oc, const char *raw, size_t n, int partial, ol_chat_out *out, char *err, size_t errlen);

#endif
