/*
 * forward_driver.c -- runs bankml's forward pass (src/graph/forward.c) for the
 * oracle suite testing/oracle_forward.py, which compares it with llama.cpp.
 *
 * Usage:
 *   forward_driver [options] dump MODEL TOKENS.i32 OUTDIR
 *       Evaluates the prompt (step 0), then -n single-token steps of the
 *       argmax, writing OUTDIR/step<k>/<name>-<layer>.bin (or <name>.bin for
 *       layer -1) for every tapped tensor (float32, token-major rows) and
 *       OUTDIR/step<k>/logits.f32 -- the layout kit-llama-dump writes, by name.
 *   forward_driver [options] greedy MODEL TOKENS.i32 N
 *       Prints the N greedy continuation ids (argmax fed back), one line.
 * Options: -c CTX (default 512), -t LLAMA_THREADS (default 2), -j POOL_THREADS
 * (default 2), -ub N_UBATCH (default 512), -n STEPS (dump; default 0),
 * -chunks A,B,...: evaluate the prompt in these pieces (prefix cache tests),
 * -portable 1: the portable C kernels only (same bits expected).
 * Exit 0, or 2 with one line on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "graph/forward.h"
#include "ops/f16.h"
#include "file/gguf.h"
#include "ops/q8_0.h"

typedef struct {
    char dir[4096];
    int failed;
} dump_state;

static void on_tap(void *user, const char *name, int layer, const float *d, size_t rows,
                   size_t width, size_t first)
{
    dump_state *s = user;
    char path[4400];
    (void)first;
    if (layer >= 0)
        snprintf(path, sizeof path, "%s/%s-%d.bin", s->dir, name, layer);
    else
        snprintf(path, sizeof path, "%s/%s.bin", s->dir, name);
    /* Micro-batches append: a prompt in several pieces gives all its rows. */
    FILE *f = fopen(path, "ab");
    if (!f || fwrite(d, sizeof(float), rows * width, f) != rows * width) s->failed = 1;
    if (f) fclose(f);
}

static int die(const char *a, const char *b)
{
    fprintf(stderr, "forward_driver: %s%s%s\n", a, b ? ": " : "", b ? b : "");
    return 2;
}

static int32_t *read_ids(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1024, len = 0;
    int32_t *v = malloc(cap * sizeof *v);
    while (v) {
        if (len == cap) {
            int32_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) { free(v); v = NULL; break; }
            v = nv;
            cap *= 2;
        }
        size_t got = fread(v + len, sizeof *v, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    *n = len;
    return v;
}

int main(int argc, char **argv)
{
    fw_opts o = { 2, 512, NULL, 2, 0, 0, 0, 0 };
    size_t n_ctx = 512;
    int steps = 0;
    char *chunks = NULL;
    int a = 1;
    for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
        if (!strcmp(argv[a], "-c")) n_ctx = (size_t)atol(argv[a + 1]);
        else if (!strcmp(argv[a], "-t")) o.llama_threads = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-j")) o.n_threads = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-ub")) o.n_ubatch = (size_t)atol(argv[a + 1]);
        else if (!strcmp(argv[a], "-n")) steps = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-chunks")) chunks = argv[a + 1];
        else if (!strcmp(argv[a], "-portable")) {
            int on = atoi(argv[a + 1]);
            q8_set_simd(!on);
            f16_force_portable(on);
        }
        else return die("unknown option", argv[a]);
    }
    if (argc - a != 4) {
        fprintf(stderr, "usage: forward_driver [opts] dump|greedy MODEL TOKENS.i32 OUTDIR|N\n");
        return 2;
    }
    const char *mode = argv[a], *model = argv[a + 1], *tokp = argv[a + 2], *last = argv[a + 3];
    char err[512];
    gguf_map map;
    if (gguf_map_open(model, &map, err, sizeof err)) return die(err, NULL);
    gguf_header h;
    uint64_t need = 0;
    if (gguf_parse(map.p, map.len, &h, &need, err, sizeof err) != GGUF_OK)
        return die("cannot parse the header", model);
    fw_weights *w;
    fw_seq *m;
    if (fw_weights_open(&w, &map, &h, &o, err, sizeof err)) return die(err, NULL);
    if (fw_seq_new(&m, w, n_ctx, err, sizeof err)) return die(err, NULL);
    size_t n = 0;
    int32_t *ids = read_ids(tokp, &n);
    if (!ids || n == 0) return die("cannot read token ids", tokp);
    const size_t nv = fw_weights_hp(w)->n_vocab;
    float *logits = malloc(nv * sizeof(float));
    if (!logits) return die("out of memory", NULL);
    dump_state ds = { "", 0 };
    int dump = !strcmp(mode, "dump");
    if (!dump && strcmp(mode, "greedy")) return die("unknown mode", mode);
    if (dump) {
        if (mkdir(last, 0755) && errno != EEXIST) return die(strerror(errno), last);
        fw_set_tap(m, on_tap, &ds);
    }
    int nsteps = dump ? steps : atoi(last);
    int32_t next = 0;
    for (int step = 0; step <= nsteps; step++) {
        if (dump) {
            snprintf(ds.dir, sizeof ds.dir, "%s/step%d", last, step);
            if (mkdir(ds.dir, 0755) && errno != EEXIST) return die(strerror(errno), ds.dir);
        }
        if (step == 0) {
            size_t done = 0;
            char *p = chunks;
            while (done < n) {
                size_t piece = n - done;
                if (p && *p) {
                    size_t c = (size_t)strtoul(p, &p, 10);
                    if (*p == ',') p++;
                    if (c > 0 && c < piece) piece = c;
                }
                if (fw_eval(m, ids + done, piece, logits, 0, err, sizeof err)) return die(err, NULL);
                done += piece;
            }
        } else {
            if (fw_decode(m, next, logits, err, sizeof err)) return die(err, NULL);
        }
        next = fw_argmax(logits, nv);
        if (dump) {
            char path[4200];
            snprintf(path, sizeof path, "%s/logits.f32", ds.dir);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(logits, sizeof(float), nv, f) != nv) return die("cannot write", path);
            fclose(f);
            if (ds.failed) return die("cannot write the dump in", ds.dir);
        } else if (step < nsteps) {
            printf("%s%d", step ? " " : "", (int)next);
        }
        if (!dump && step == nsteps - 1) break;
    }
    if (!dump) printf("\n");
    free(logits);
    free(ids);
    fw_seq_free(m);
    fw_weights_close(w);
    gguf_header_free(&h);
    gguf_map_close(&map);
    return 0;
}
