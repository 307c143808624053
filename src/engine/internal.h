/*
 * internal.h -- what engine.c and slot.c share inside the engine layer:
 * the handle, a loaded model and its slot. Nothing outside src/engine
 * includes it.
 */
#ifndef BANKML_ENGINE_INTERNAL_H
#define BANKML_ENGINE_INTERNAL_H

#include <pthread.h>

#include "file/gguf.h"          /* before sampler.h: it declares sampler_gguf_defaults */
#include "base/par.h"
#include "engine/engine.h"
#include "file/pin.h"
#include "file/verify.h"
#include "graph/forward.h"
#include "text/tokenizer.h"

typedef struct {
    char name[256];            /* stem, lower-cased */
    char file[256];            /* base name */
    char path[4096];           /* where it is (as given for the startup model) */
    char fork[4096];           /* the FORK.json that pins it */
    int present;
    int has_meta;              /* meta filled: the model was loaded once */
    engine_meta meta;
} reg_entry;

typedef struct pc_entry pc_entry;

/* One of llama-server's slots (-np N): its own sequence over the shared
 * weights (a stream of its own in a non-unified KV cache: n_ctx_seq cells
 * that no other slot's cells change), the tokens it holds, when it was last
 * used. */
/* One of b11669's context checkpoints (common_prompt_checkpoint): the
 * tokens before it, the window cache's positions then, the task that took
 * it, the window cells (fw_swa_save). */
typedef struct {
    int64_t n_tokens;
    int32_t pos_min, pos_max;
    int64_t id_task;
    fw_swa_ckpt *data;
} engine_ckpt;

typedef struct {
    fw_seq *fw;                /* KV cache, positions, logits */
    int32_t *toks;             /* tokens held in the KV cache (fw_n_past of them) */
    size_t n, cap;
    int64_t t_last_used;       /* the model's use clock at its last request; -1 never */
    engine_ckpt *ckpt;         /* a window model's checkpoints without --swa-full, oldest first */
    size_t n_ckpt, cap_ckpt;
    int swa_diverged;          /* a window model without --swa-full refused a request here: what llama-server's
                                  slot holds is unknown until a request without cache_prompt resets it */
} engine_slot;

/* One loaded model: everything the slot needs, verified and mapped. */
struct engine_model {
    engine *e;                 /* the engine it belongs to */
    size_t idx;                /* registry entry ((size_t)-1 for `bankml generate`'s own) */
    bankml_verified *ver;
    pin_ident ident;
    gguf_map map;
    fw_weights *fw_w;          /* the weights in the map */
    engine_slot *slots;        /* llama-server's slots, n_slots of them (-np) */
    int n_slots;
    int cur;                   /* the slot the last selection chose */
    int64_t use_clock;         /* counts selections: the slots' t_last_used */
    tok_vocab *vocab;
    char *tmpl;
    size_t tmpl_len;
    char *bos_piece, *eos_piece;
    const char *ftype;         /* llama_ftype_name of the file (/props model_ftype), static */
    sampler_params defaults;
    int reasoning;             /* the template has a <think> block: llama-server parses the answer (never with
                                  --no-jinja: its legacy path has no parser) */
    int no_jinja;              /* engine_opts.no_jinja: prompts in llama-server's built-in format legacy_fmt */
    tmpl_caps caps;            /* template_caps(tmpl) (engine_model_caps) */
    int legacy_fmt;            /* template_legacy_detect(tmpl) with no_jinja; -1: none matches */
    char **pieces;             /* DRY's view of the vocabulary, built on first use */
    size_t *piece_lens;
    gr_vocab *gvocab;          /* the grammar's view of the vocabulary (token_to_piece, special), built on
                                  first use, shared read-only by every slot */
    pthread_mutex_t chat_mu;   /* guards chat_state, chat_spec, chat and chat_err (filled on first use; a leaf
                                  lock, taken after the engine lock or the residency lock) */
    int chat_state;            /* engine_model_chat: 0 not analysed yet, 1 analysed, -1 failed (chat_err) */
    int chat_spec;             /* chat_specialized(tmpl) (a ca_specialized) */
    chat_analysis chat;        /* chat_analyze(tmpl) when chat_state is 1 and chat_spec is CA_SPEC_NONE */
    char chat_err[512];
    pc_entry *pc;              /* the host prompt cache, oldest first */
    size_t n_pc, cap_pc;
};

struct engine {
    engine_opts o;             /* as given, with 0s replaced by the defaults */
    size_t n_ctx_seq;          /* cells per slot: pad256(pad256(-c) / -np), as llama_context */
    size_t n_batch;            /* prompt tokens per decode call: min(-c, -b), as llama_context */
    size_t n_ubatch;           /* min(n_batch, -ub): the micro-batch that decides the kernels */
    float sps;                 /* --slot-prompt-similarity (0: the similarity rule is off) */
    reg_entry *reg;
    size_t n_reg;
    size_t def;                /* the startup model */
    engine_model *cur;         /* written with run and res (write) held; read with either */
    int64_t expires_us;        /* 0: never; __atomic loads and stores (a reader's keep-alive refreshes it) */
    pthread_mutex_t run;       /* the engine lock */
    pthread_rwlock_t res;      /* the residency lock: readers (engine_peek) hold it to read; cur, the registry's
                                  meta and the last verification are changed only with it written, after run */
    par_pool *pool;
    int64_t hashed_at;         /* hashed_at, last_sha, last_verified_json: written under res (write) */
    char last_sha[65];
    char *last_verified_json;
    pthread_t reaper;
    int have_reaper;
    int stop_reaper;           /* __atomic: engine_free asks the reaper to end */
    pthread_mutex_t met_mu;    /* the counters' own lock */
    engine_metrics met;
    size_t met_head;           /* the ring's next record */
    int64_t next_task;         /* llama-server's task ids (met_mu) */
    engine_slot_info views[ENGINE_MAX_SLOTS];   /* what GET /slots shows (met_mu) */
    int n_views;
    size_t views_n_ctx;
};

/* header.c */
/* The template a model is rendered with, as llama-server picks it: --chat-template(-file)'s text, else the
 * GGUF's tokenizer.chat_template, else "mistral-v7-tekken" for a 40-layer tekken file, else (or for
 * "chatml") template_chatml_fallback. *len its bytes; the text is e's, h's or static. */
const char *engine_template_for(const engine *e, const gguf_header *h, unsigned n_layer, const tok_vocab *v,
                                size_t *len);

/* metrics.c */
/* One line on stderr, "<log_name>: <text>", when the engine has a log name. */
void engine_log(const engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void engine_met_busy(engine *e, int delta_processing, int delta_deferred);
void engine_met_record(engine *e, const engine_model *m, const engine_result *r, uint64_t n_calls,
                       const char *finish, long long uj0);   /* uj0: engine_rapl_uj at the start */
void engine_err(engine_error *er, engine_kind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* GET /slots' views (met_mu): a model's slots as it loads (tasks kept),
 * every slot's token count (m NULL: unloaded, 0), a task starting (its id, params, reuse), a
 * step (tokens held, decoded, remaining, the new-line flag), its end
 * (has_next: 1 when it ended without deciding a stop, as a cancel). */
void engine_view_open(engine *e, const engine_model *m);
void engine_view_tokens(engine *e, const engine_model *m);
void engine_view_begin(engine *e, int slot, const engine_request *rq, int64_t id_task);
void engine_view_reuse(engine *e, int slot, size_t n_cached, size_t n_processed);
void engine_view_step(engine *e, int slot, size_t n_tokens, size_t n_decoded, int32_t n_predict, int new_line);
void engine_view_end(engine *e, int slot, size_t n_tokens, int has_next);
void engine_view_free(engine *e);

/* slot.c */
void engine_pc_clear(engine_model *m);
/* Empties a slot (its KV cells and tokens). */
void engine_slot_clear(engine_slot *sl);
/* Frees the slot's checkpoints (the slot itself stays). */
void engine_slot_ckpt_clear(engine_slot *sl);
void engine_vocab_free(engine_model *m);
/* Builds m->gvocab (the grammar's pieces and end set). 0, or -1 with er. */
int engine_grammar_vocab(engine_model *m, engine_error *er);

#endif
