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
} reg_entry;

typedef struct pc_entry pc_entry;

/* One loaded model: everything the slot needs, verified and mapped. */
struct engine_model {
    engine *e;                 /* the engine it belongs to */
    size_t idx;                /* registry entry ((size_t)-1 for `bankml generate`'s own) */
    bankml_verified *ver;
    pin_ident ident;
    gguf_map map;
    fw_weights *fw_w;          /* the weights in the map */
    fw_seq *fw;                /* the slot's sequence: KV cache, positions, logits */
    tok_vocab *vocab;
    char *tmpl;
    size_t tmpl_len;
    char *bos_piece, *eos_piece;
    sampler_params defaults;
    int reasoning;             /* the template has a <think> block: llama-server parses the answer */
    int32_t *slot;             /* tokens held in the KV cache (fw_n_past of them) */
    size_t n_slot, cap_slot;
    char **pieces;             /* DRY's view of the vocabulary, built on first use */
    size_t *piece_lens;
    pc_entry *pc;              /* the host prompt cache, oldest first */
    size_t n_pc, cap_pc;
};

struct engine {
    engine_opts o;
    reg_entry *reg;
    size_t n_reg;
    size_t def;                /* the startup model */
    engine_model *cur;
    int64_t expires_us;        /* 0: never */
    pthread_mutex_t run;       /* the engine lock */
    par_pool *pool;
    int64_t hashed_at;
    char last_sha[65];
    char *last_verified_json;
    pthread_t reaper;
    int have_reaper;
    volatile int stop_reaper;
    pthread_mutex_t met_mu;    /* the counters' own lock */
    engine_metrics met;
    size_t met_head;           /* the ring's next record */
};

/* metrics.c */
/* One line on stderr, "<log_name>: <text>", when the engine has a log name. */
void engine_log(const engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void engine_met_busy(engine *e, int delta_processing, int delta_deferred);
void engine_met_record(engine *e, const engine_model *m, const engine_result *r, uint64_t n_calls,
                       const char *finish);
void engine_err(engine_error *er, engine_kind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* slot.c */
void engine_pc_clear(engine_model *m);
void engine_vocab_free(engine_model *m);

#endif
